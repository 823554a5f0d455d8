"""Hudi's metadata table (``.hoodie/metadata/``, a merge-on-read table of HFiles) as
Tidemark keeps it: which of its partitions a table has (``partitions``), the ``files``
partition's ``HoodieMetadataRecord``s (``files_records``), its own timeline and folder
(``timeline``), the deltacommit that records a data instant's file changes on it
(``deltacommit``), its slices (``slices``), the compaction and cleaning that keep it
bounded (``compaction``), the listing through it (``listing``) and a new table's
(``bootstrap``).

Hudi's readers (and hudi-rs from table version 8) list a table's files through the
``files`` partition, so every data instant Tidemark completes gets its metadata
deltacommit first, and the file-system view lists the table through it (``listing``).
Below ``files`` (whose view the face hands its listing) and ``writes`` (which calls it at
a commit and a rollback), above ``logfiles``, ``properties`` and ``timeline``, whose
encodings it reuses."""

__all__ = [
    "bootstrap",
    "compaction",
    "deltacommit",
    "files_records",
    "listing",
    "partitions",
    "slices",
    "timeline",
]
