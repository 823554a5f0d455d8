"""The timeline's actions: what kinds of instant a Hudi table records, each with its own
metadata encoding in this package."""

from __future__ import annotations

COMMIT = "commit"
DELTA_COMMIT = "deltacommit"
"""A merge-on-read write (log blocks appended, new base files for inserts)."""
COMPACTION = "compaction"
"""A merge-on-read table's pending compaction; it completes as a ``commit``."""
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
        DELTA_COMMIT,
        COMPACTION,
        "logcompaction",
        "savepoint",
        "restore",
        "indexing",
        "schemacommit",
    }
)
COMPLETED_AS = {CLUSTERING: REPLACE_COMMIT, COMPACTION: COMMIT}
"""Pending actions that complete as another: a clustering as a replacecommit (layout 2),
a compaction as a commit (both layouts: ``<t>.compaction.requested``, ``.inflight``, then
``<t>.commit``)."""


def completed_action(action: str) -> str:
    """The action an instant of ``action`` has once completed."""
    return COMPLETED_AS.get(action, action)


WRITE_ACTIONS = frozenset({COMMIT, DELTA_COMMIT, REPLACE_COMMIT})
"""The actions that write data files: what makes a file committed, and what archival,
cleaning and conflict checks count as writes."""
