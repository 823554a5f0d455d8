"""Leases on the table's own storage: ``StorageLease`` (generations, heartbeat, fencing),
the table lock and ``changing(table, role)``, and the leases of one instant (a write, a
clustering plan's run). Imports ``files`` and below."""

__all__ = [
    "instant_lease",
    "plan_run",
    "storage_lease",
    "table_lock",
    "write_lease",
]
