"""``hoodie.properties``: the table configuration every Hudi reader starts from, and how
Tidemark treats each of its keys. Imports ``timeline`` (which versions exist) and ``metadata``."""

__all__ = [
    "config",
    "support",
]
