"""Files: base-file names, the file-system view (the latest committed slice of each file
group), snapshot reads of base files, column statistics, and the index-free scan baseline.
Imports ``filters``, ``records``, ``properties``, ``timeline``, ``metadata``."""

__all__ = [
    "column_stats",
    "file_names",
    "reader",
    "scan",
    "view",
]
