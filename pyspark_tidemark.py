"""Found by PySpark's discovery of installed data sources (top-level modules named
``pyspark_*`` exporting a ``DefaultSource``): ``format("tidemark")`` works with no call at all
(see ``spark_jobs.datasource``; ``tidemark.spark.read`` is the fast path)."""

from tidemark.jobs.datasource import TidemarkDataSource as DefaultSource

__all__ = ["DefaultSource"]
