"""The index service's background compaction: keeps every open table's deltas per shard
bounded, so the merged view of a shard's deltas that a lookup searches beside its base
merges at most about ``compact_deltas`` files (and is cheap to rebuild when they change).

A daemon thread checks the open tables every ``compact_interval_s``, and sooner when a
stage call wakes it (a commit staging its changes means earlier ones may have completed,
making their deltas visible). A table with a shard that has ``compact_deltas`` visible
deltas is compacted (``RecordIndex.compact``; by count alone: the service's lookups
search a shard's deltas merged once, so their size costs it that merge, not every
lookup); another process compacting it already (``ConflictError``) or a storage failure
only postpones it to the next check.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable

import structlog

from tidemark.errors import ConflictError, TidemarkError
from tidemark.index.record_index import RecordIndex

log = structlog.get_logger(__name__)


class Compactor:
    """Started at once; ``close()`` stops it after the compaction in progress."""

    def __init__(
        self,
        open_indexes: Callable[[], list[RecordIndex]],
        min_deltas: int,
        interval_s: float,
    ) -> None:
        self._open_indexes = open_indexes
        self.min_deltas = min_deltas
        self.interval_s = interval_s
        self._owner = f"index service compaction on {socket.gethostname()} (pid {os.getpid()})"
        """Named in the lease another replica sees (replicas in pods all run as pid 1)."""
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="index-compactor", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join()

    def run_once(self) -> int:
        """Compact each open table that needs it; returns how many were compacted."""
        compacted = 0
        for index in self._open_indexes():
            if self._stop.is_set():
                break
            try:
                if not index.needs_compaction(self.min_deltas, delta_share=None):
                    continue
                done = index.compact(self.min_deltas, delta_share=None, owner=self._owner)
            except ConflictError:
                continue  # another process compacts this table right now
            except TidemarkError as error:
                log.warning("index.compaction_failed", table=index.storage.uri, error=str(error))
                continue
            compacted += 1
            log.info(
                "index.compacted",
                table=index.storage.uri,
                shards=len(done.shards),
                deltas_folded=done.deltas_folded,
                manifests_deleted=done.manifests_deleted,
            )
        return compacted

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.run_once()
            except Exception as error:  # the thread must outlive any one table's failure
                log.exception("index.compactor_error", error=str(error))
