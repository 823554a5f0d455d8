"""Filters: ``(column, op, value)`` filters bound once to a table's schema (values typed
as Spark reads literals of their columns), and what each reader derives from them:
pyarrow expressions, what statistics rule out, the partitions to list and keep, the
record keys to look up. Imports ``records`` and below."""

__all__ = [
    "arrow",
    "expression",
    "literals",
    "partitions",
    "record_keys",
    "statistics",
]
