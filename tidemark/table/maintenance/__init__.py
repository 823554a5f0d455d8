"""Keeping a table bounded: the cleaner (its plan and its run), compaction's scheduling,
orphan files, archival of the timeline, and upgrades between table versions. The top of
the table library: imports any package below; only the layers above ``tidemark.table``
import it."""

__all__ = [
    "archival",
    "clean",
    "clean_plan",
    "compaction",
    "orphans",
    "upgrade",
]
