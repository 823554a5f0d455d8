"""Table-service plans as Hudi encodes them: clustering plans (``replacecommit`` or, on
versions 8 and 9, ``clustering`` requested instants), compaction plans (``compaction``
requested instants, completed as commits) and the slices pending compactions need. Imports
``files`` and below."""

__all__ = [
    "clustering",
    "compaction",
]
