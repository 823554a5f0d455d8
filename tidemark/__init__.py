"""Tidemark: Apache Hudi table services as gRPC services for PySpark data lakes."""

__version__ = "0.1.0"
