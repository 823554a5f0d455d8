"""Found by PySpark's discovery of installed data sources (top-level modules named
``pyspark_*`` exporting a ``DefaultSource``): ``format("tidemark")`` works with no call at all,
reading the whole snapshot; ``tidemark.spark.register`` adds pushdown (see
``spark_jobs.datasource``)."""

from tidemark.jobs.datasource import ScanDataSource as DefaultSource

__all__ = ["DefaultSource"]
