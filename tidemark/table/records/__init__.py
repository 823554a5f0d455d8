"""Records: keys and partition paths (Hudi's key generators), Avro names, Arrow <-> Avro
schemas and their evolution, event-time ordering, and filter literals typed by their column.
Imports ``properties`` and below."""

__all__ = [
    "avro_names",
    "keys",
    "literals",
    "ordering",
    "schema",
    "timestamp_keys",
]
