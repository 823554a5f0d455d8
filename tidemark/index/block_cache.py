"""An LRU cache of decoded shard blocks (and opened shard readers) under a byte budget.

Decoded blocks are what a warm lookup searches: keeping them saves the read, the checksum
and the zstd decompression. Hits and misses are counted for the index's stats.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass

DEFAULT_BUDGET_BYTES = 256 << 20


@dataclass(frozen=True)
class CacheStats:
    hits: int
    misses: int
    bytes: int
    budget_bytes: int
    entries: int


class BlockCache:
    """Thread-safe LRU of values with a size each; inserting past the budget evicts the
    least recently used. A value larger than the whole budget is not kept."""

    def __init__(self, budget_bytes: int = DEFAULT_BUDGET_BYTES) -> None:
        self.budget_bytes = budget_bytes
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._bytes = 0
        self._hits = 0
        self._misses = 0

    def get(self, key: Hashable, *, count_miss: bool = True) -> object | None:
        """The value (counted as a hit), or None (a miss, unless ``count_miss`` is False:
        a probe for an optional value that is not followed by a read)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self._misses += count_miss
                return None
            self._entries.move_to_end(key)
            self._hits += 1
            return entry[0]

    def put(self, key: Hashable, value: object, size: int) -> None:
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            if size > self.budget_bytes:
                return
            self._entries[key] = (value, size)
            self._bytes += size
            while self._bytes > self.budget_bytes:
                _, (_, evicted) = self._entries.popitem(last=False)
                self._bytes -= evicted

    def discard(self, keys: list[Hashable]) -> None:
        """Drop these entries (absent ones are ignored)."""
        with self._lock:
            for key in keys:
                entry = self._entries.pop(key, None)
                if entry is not None:
                    self._bytes -= entry[1]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(
                self._hits, self._misses, self._bytes, self.budget_bytes, len(self._entries)
            )
