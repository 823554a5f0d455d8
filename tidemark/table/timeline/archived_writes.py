"""What a file listing asks a table's archive (v6 archive logs, v8/9 LSM history): which
writes it lists as completed, and when each of its deltacommits completed. A long-running
writer keeps this of each archive file for its life (``ParsedFiles``), not the file's
every entry: the archive grows with the table's history, and this by one time a write."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ArchivedWrites:
    """The completed commits, deltacommits and replacecommits of one archive file or of a
    whole archive (``writes``: requested times), and the deltacommits among them
    (requested time -> completion time)."""

    writes: frozenset[str]
    deltacommits: Mapping[str, str]

    @classmethod
    def union(cls, parts: Iterable[ArchivedWrites]) -> ArchivedWrites:
        writes: set[str] = set()
        deltacommits: dict[str, str] = {}
        for part in parts:
            writes |= part.writes
            deltacommits.update(part.deltacommits)
        return cls(frozenset(writes), deltacommits)


NO_WRITES = ArchivedWrites(frozenset(), {})
