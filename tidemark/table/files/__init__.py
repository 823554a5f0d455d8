"""Files: base-file names, the file-system view (the latest committed slice of each file
group), merge-on-read slices and their merge, snapshot reads and their query types
(snapshot, read-optimized), column statistics, and the index-free scan baseline. Imports
``logfiles``, ``filters``, ``records``, ``properties``, ``timeline``, ``metadata``."""

__all__ = [
    "column_stats",
    "file_names",
    "merge",
    "query_types",
    "reader",
    "scan",
    "slices",
    "view",
]
