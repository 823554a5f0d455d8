"""Writes: the checks that refuse a write before it touches anything, markers, writers
against pending clustering plans, and finishing and undoing writes (commit, rollback).
Imports ``plans``, ``leases`` and below."""

__all__ = [
    "checks",
    "commit",
    "hudi_metadata_table",
    "markers",
    "pending_clustering",
]
