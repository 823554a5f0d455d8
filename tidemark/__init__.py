"""Tidemark: Apache Hudi table services as gRPC services for PySpark data lakes."""

from tidemark.logs import use_library_defaults

__version__ = "0.1.0"

use_library_defaults()
