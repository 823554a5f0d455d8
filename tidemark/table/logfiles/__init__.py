"""Hudi's log files, the merge-on-read layer under a file slice's base file: their names
(``file_names``), the ``#HUDI#`` block framing with its headers and the tolerance of a
crash's partial block (``framing``), and the block contents: data records in Avro or
Parquet (``data_blocks``), deleted keys (``delete_blocks``) and version 6's rollback
command (``command_blocks``). Read and written exactly as Apache Hudi does (0.14 to 1.1,
table versions 6, 8 and 9). Imports ``records`` and below."""

__all__ = [
    "command_blocks",
    "data_blocks",
    "delete_blocks",
    "file_names",
    "framing",
]
