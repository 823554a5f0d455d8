"""The timeline: instants and their files, the active timeline of layout 1 (table version
6, ``.hoodie/``) and layout 2 (versions 8 and 9, ``.hoodie/timeline/``), the archived timeline
(v6 archive logs, v8/9 LSM history) and its writer, which layout each version uses, a
table's history, and the per-process cache of parsed timeline files. Imports ``metadata``
only (and the table face for types)."""

__all__ = [
    "archive_writer",
    "archived",
    "archived_writes",
    "history",
    "instant",
    "layout1",
    "layout2",
    "lsm",
    "parsed_files",
    "versions",
]
