"""Writes: the checks that refuse a write before it touches anything, markers, writers
against pending clustering plans, and finishing and undoing writes (commit, rollback;
a failed deltacommit's log appends undone per table version).
Imports ``plans``, ``leases`` and below."""

__all__ = [
    "checks",
    "commit",
    "hudi_metadata_table",
    "log_rollback",
    "markers",
    "pending_clustering",
]
