"""The timeline's actions: what kinds of instant a Hudi table records, each with its own
metadata encoding in this package."""

from __future__ import annotations

COMMIT = "commit"
REPLACE_COMMIT = "replacecommit"
ROLLBACK = "rollback"
CLEAN = "clean"
CLUSTERING = "clustering"
"""Layout 2's action for a requested or inflight clustering (completed: replacecommit)."""
ACTIONS = frozenset(
    {
        COMMIT,
        REPLACE_COMMIT,
        ROLLBACK,
        CLEAN,
        "deltacommit",
        "compaction",
        "logcompaction",
        "savepoint",
        "restore",
        "indexing",
        "schemacommit",
    }
)
