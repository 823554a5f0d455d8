"""Table-service plans as Hudi encodes them: clustering plans (``replacecommit`` or, on
versions 8 and 9, ``clustering`` requested instants). Imports ``files`` and below."""

__all__ = [
    "clustering",
]
