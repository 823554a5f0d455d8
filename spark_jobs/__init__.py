"""PySpark jobs over Hudi copy-on-write tables: write, read and rollback.

Executors write Parquet through ``tidemark.storage`` (never Spark's Hadoop connectors), so the
same code path serves local directories and S3.
"""
