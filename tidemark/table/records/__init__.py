"""Records: keys and partition paths (Hudi's key generators), Avro names, Arrow <-> Avro
schemas and their evolution, and event-time ordering. Imports ``properties`` and below."""

__all__ = [
    "avro_names",
    "keys",
    "ordering",
    "schema",
    "timestamp_keys",
]
