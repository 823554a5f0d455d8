"""Parsed timeline files kept per process, so a writer that opens its table again each
micro-batch parses only the files that are new since the last batch, not its whole
history: completed instant files and archive files are never rewritten in place (a
completed instant is created if absent; an archive file is replaced by a merged one under
another name, or appended to, which changes its size)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Collection
from typing import Generic, TypeVar

Parsed = TypeVar("Parsed")


class ParsedFiles(Generic[Parsed]):
    """Parsed content by (table storage, file, size listed), least recently used beyond
    ``entries``: a file listed with another size (appended, damaged or replaced) is read
    again."""

    def __init__(self, entries: int) -> None:
        self._entries = entries
        self._items: OrderedDict[tuple[str, str, int], Parsed] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, int]) -> Parsed | None:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: tuple[str, str, int], parsed: Parsed) -> None:
        with self._lock:
            self._items[key] = parsed
            if len(self._items) > self._entries:
                self._items.popitem(last=False)

    def read(self, key: tuple[str, str, int], parse: Callable[[], Parsed]) -> Parsed:
        """The cached content of ``key``, else ``parse()``'s, kept."""
        found = self.get(key)
        if found is None:
            found = parse()
            self.put(key, found)
        return found

    def keys(self, table: str) -> list[tuple[str, str, int]]:
        """The keys of ``table``'s files held (what ``retain`` bounds)."""
        with self._lock:
            return [key for key in self._items if key[0] == table]

    def retain(self, table: str, listed: Collection[str]) -> None:
        """Forget ``table``'s files no longer ``listed`` (archived instants, merged
        archive files: never read from here again), so a long-running writer keeps what
        its table has now, not its last ``entries`` files."""
        with self._lock:
            gone = [key for key in self._items if key[0] == table and key[1] not in listed]
            for key in gone:
                del self._items[key]
