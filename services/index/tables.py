"""The tables an index service serves: each one's ``RecordIndex``, opened on first use and
shared by every call, over one block cache with the service's memory budget, and
compacted in the background (``compactor.py``).

Opening checks the table first (a path that is not a Hudi table is NOT_FOUND, a table
without a record index FAILED_PRECONDITION; neither is remembered, so a table built
later is served at once). An open index re-reads ``index.properties`` at most once per
``recheck_s`` and is reopened when a rebuild replaced it. Every method blocks on
storage: the servicer calls them in threads.

This is where the service opens a table (``HoodieTable.open`` on the canonical URI the
request validation resolved), once per open index rather than once per call: a lookup
costs no ``hoodie.properties`` read and no timeline listing. It opens the table again only
when the index has to be reopened (a rebuild replaced it, or it left the LRU), since an
index held across a rebuild would answer from shards that no longer exist; the index
follows the timeline by itself (``RecordIndex.refresh``).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import OrderedDict

import structlog

from tidemark.errors import NotFoundError
from tidemark.index import layout
from tidemark.index.block_cache import BlockCache
from tidemark.index.build import BuildStatus
from tidemark.index.record_index import RecordIndex
from tidemark.services.index.compactor import Compactor
from tidemark.services.index.config import IndexConfig
from tidemark.table import HoodieTable

log = structlog.get_logger(__name__)


@dataclasses.dataclass
class _Open:
    index: RecordIndex
    checked_at: float


class IndexTables:
    """Thread-safe map of canonical table URI -> open ``RecordIndex`` (LRU-bounded)."""

    def __init__(self, config: IndexConfig) -> None:
        self.config = config
        self.cache = BlockCache(config.block_cache_bytes)
        self._lock = threading.Lock()
        self._open: OrderedDict[str, _Open] = OrderedDict()
        self.compactor = Compactor(
            self._open_indexes, config.compact_deltas, config.compact_interval_s
        )

    def index(self, uri: str) -> RecordIndex:
        """The table's index, as current as ``recheck_s`` allows."""
        with self._lock:
            entry = self._open.get(uri)
            if entry is not None:
                self._open.move_to_end(uri)
        now = time.monotonic()
        if entry is not None:
            if now - entry.checked_at < self.config.recheck_s or self._unchanged(entry.index):
                entry.checked_at = now
                return entry.index
            log.info("record index replaced, reopening", table=uri)
            with self._lock:
                self._open.pop(uri, None)
        index = RecordIndex.open(HoodieTable.open(uri).storage, self.cache)
        with self._lock:
            self._open[uri] = _Open(index, now)
            self._open.move_to_end(uri)
            while len(self._open) > self.config.max_open_tables:
                self._open.popitem(last=False)
        return index

    def status(self, uri: str) -> BuildStatus:
        """Read from storage on every call: a build in progress or just published shows."""
        storage = HoodieTable.open(uri).storage
        try:
            properties = layout.IndexProperties.read(storage)
        except NotFoundError:
            building = next(storage.list(layout.SHARDS_DIR + "/"), None) is not None
            return BuildStatus(False, 0, "", building, 0)
        return BuildStatus(
            True, properties.num_shards, properties.as_of, False, properties.format_version
        )

    def open_count(self) -> int:
        with self._lock:
            return len(self._open)

    def close(self) -> None:
        """Stop compacting, forget every open index and empty the cache (the service is
        stopping)."""
        self.compactor.close()
        with self._lock:
            self._open.clear()
        self.cache.clear()

    def _open_indexes(self) -> list[RecordIndex]:
        with self._lock:
            return [entry.index for entry in self._open.values()]

    def _unchanged(self, index: RecordIndex) -> bool:
        """Whether ``index.properties`` still says what it said when ``index`` opened."""
        try:
            return layout.IndexProperties.read(index.storage) == index.properties
        except NotFoundError:
            return False
