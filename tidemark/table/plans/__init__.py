"""Table-service plans as Hudi encodes them: clustering plans (``replacecommit`` or, on
versions 8 and 9, ``clustering`` requested instants) and compaction plans (``compaction``
requested instants, completed as commits). Imports ``files`` and below."""

__all__ = [
    "clustering",
    "compaction",
]
