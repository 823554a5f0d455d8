"""The batching engine: marker dirs of many tables and instants, one dispatcher, a flush pool.

Every ``batch_interval_ms`` the dispatcher drains each dir's pending creates into one
batch for the dir's next free MARKERS file and hands it to the flush pool
(``num_marker_files`` threads, as Hudi's timeline server). A maintenance thread renews
leases, drops dirs whose lease was lost, and evicts idle dirs so memory stays bounded;
the number of markers accepted but not yet answered is capped by ``queue_limit``.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import structlog

from tidemark.clock import SYSTEM_CLOCK, Clock
from tidemark.errors import FailedPreconditionError, ResourceExhaustedError, UnavailableError
from tidemark.services.marker.config import MarkerConfig
from tidemark.services.marker.dir_state import MarkerDirState, list_marker_dir, read_markers_files
from tidemark.services.marker.lease import DirLease
from tidemark.services.marker.metrics import FlushMetrics
from tidemark.services.marker.waiters import PendingCreate
from tidemark.storage import open_storage
from tidemark.storage.base import RequestCounter, Storage
from tidemark.table.leases.storage_lease import LockHolder, StorageLease
from tidemark.table.writes.markers import delete_marker_dir, marker_dir

log = structlog.get_logger(__name__)

DirKey = tuple[str, str]
"""(canonical table URI, instant time)."""


def default_owner() -> str:
    """Unique per process: host, pid and a random suffix (pids are reused after restarts)."""
    return f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"


class MarkerEngine:
    """Creates, lists and deletes markers; thread-safe. ``close`` stops the threads.

    ``address`` is where clients reach this engine (its server's advertise address, set
    when it is served): the leases it takes record it for the other replicas to name.
    ``clock`` dates the marker dir leases and times idle dirs (tests advance it past a dead
    owner's lease or ``idle_evict_s``)."""

    def __init__(
        self, config: MarkerConfig, *, owner: str | None = None, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.config = config
        self.owner = owner or default_owner()
        self.clock = clock
        self.address = ""
        self._lock = threading.Lock()
        self._dirs: dict[DirKey, MarkerDirState] = {}
        self._storages: dict[str, Storage] = {}
        self._unanswered = 0
        self.flush_metrics = FlushMetrics()
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(config.num_marker_files, thread_name_prefix="marker-flush")
        self._threads = [
            threading.Thread(target=self._dispatch_loop, name="marker-dispatch", daemon=True),
            threading.Thread(target=self._maintain_loop, name="marker-maintain", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def create(
        self, table_uri: str, instant: str, names: Sequence[str]
    ) -> asyncio.Future[list[bool]] | None:
        """Queue markers; the future answers (True = created) once they are flushed.
        Called on the server's event loop, so it makes no storage call: None when the
        dir is not open here yet (open it with ``open_dir`` in a thread, then retry)."""
        count = len(names)
        with self._lock:
            state = self._dirs.get((table_uri, instant))
            if state is None or not state.opened:
                return None
            if self._unanswered + count > self.config.queue_limit:
                raise ResourceExhaustedError(
                    f"{self._unanswered} markers are waiting for a flush (limit "
                    f"{self.config.queue_limit}); back off and retry",
                    field="markers",
                )
            self._unanswered += count
        request = PendingCreate(names, asyncio.get_running_loop().create_future())
        if not state.enqueue(request):
            self._answered(count)
            raise _closing(instant)
        return request.future

    def open_dir(self, table_uri: str, instant: str) -> None:
        """Take the dir's lease and load its MARKERS files (storage calls), if not yet."""
        self._open_state(table_uri, instant)

    def list_markers(self, table_uri: str, instant: str) -> set[str]:
        """Every acknowledged marker (and any direct marker object) of the instant."""
        storage = self._storage(table_uri)
        with self._lock:
            state = self._dirs.get((table_uri, instant))
        listing = list_marker_dir(storage, marker_dir(instant))
        if state is not None and state.opened and not state.closed and state.lease.held:
            return state.snapshot() | listing.direct_markers
        markers = set(listing.direct_markers)
        for names in read_markers_files(storage, listing).values():
            markers.update(names)
        return markers

    def dir_exists(self, table_uri: str, instant: str) -> bool:
        prefix = marker_dir(instant) + "/"
        return next(iter(self._storage(table_uri).list(prefix)), None) is not None

    def delete_dir(self, table_uri: str, instant: str, holder: LockHolder | None = None) -> bool:
        """Delete the marker dir; True if it held anything. Without ``holder``, as the dir's
        owner (taking its lease). With the table lock's ``holder`` (checked in storage), at
        once, whoever holds the lease: a crashed writer's instant is being rolled back,
        and the process that leased its dir gives it up at its next renewal."""
        if holder is not None:
            return self._delete_for_lock_holder(table_uri, instant, holder)
        state = self._open_state(table_uri, instant)
        state.close(FailedPreconditionError("the marker dir was deleted", field="instant_time"))
        try:
            paths = [info.path for info in state.storage.list(state.directory + "/")]
            state.storage.delete_many(paths)
            state.lease.delete()
        finally:
            self._forget((table_uri, instant), state)
        log.info("marker dir deleted", table=table_uri, instant=instant, objects=len(paths))
        return bool(paths)

    def _delete_for_lock_holder(self, table_uri: str, instant: str, holder: LockHolder) -> bool:
        storage = self._storage(table_uri)
        StorageLease.check_holder(storage, holder, field="table_lock")
        with self._lock:
            state = self._dirs.pop((table_uri, instant), None)
        if state is not None:
            state.close(FailedPreconditionError("the marker dir was deleted", field="instant_time"))
        deleted = delete_marker_dir(storage, instant)
        log.info("marker dir deleted for the table lock holder", table=table_uri, instant=instant)
        return deleted

    def close(self) -> None:
        """Stop batching, fail what is still queued, release every lease."""
        self._stop.set()
        for thread in self._threads:
            thread.join()
        with self._lock:
            states = list(self._dirs.items())
        for key, state in states:
            state.close(
                UnavailableError("the marker service is shutting down", field="instant_time")
            )
            self._release(state)
            self._forget(key, state)
        self._pool.shutdown(wait=True)

    def storage_requests(self) -> dict[str, int]:
        """Storage requests made so far, by operation, over every table."""
        return self._summed(RequestCounter.snapshot)

    def storage_retries(self) -> dict[str, int]:
        """The retries of failed attempts among ``storage_requests``, by operation."""
        return self._summed(RequestCounter.retries)

    def _summed(self, count: Callable[[RequestCounter], dict[str, int]]) -> dict[str, int]:
        with self._lock:
            storages = list(self._storages.values())
        totals: Counter[str] = Counter()
        for storage in storages:
            totals.update(count(storage.requests))
        return dict(totals)

    def dir_count(self) -> int:
        with self._lock:
            return len(self._dirs)

    def unanswered(self) -> int:
        """Markers accepted and not yet answered (what ``queue_limit`` bounds)."""
        with self._lock:
            return self._unanswered

    def _open_state(self, table_uri: str, instant: str) -> MarkerDirState:
        key = (table_uri, instant)
        with self._lock:
            state = self._dirs.get(key)
            if state is None:
                storage = self._storage_locked(table_uri)
                lease = DirLease(
                    storage,
                    instant,
                    self.owner,
                    self.config.lease_s,
                    address=self.address,
                    clock=self.clock,
                    on_takeover=self.flush_metrics.takeovers.inc,
                )
                state = self._dirs[key] = MarkerDirState(
                    storage,
                    instant,
                    self.config.num_marker_files,
                    lease,
                    on_answered=self._answered,
                    on_flushed=self.flush_metrics.observe,
                    clock=self.clock,
                )
        if state.closed:
            raise _closing(instant)
        state.open()
        return state

    def _storage(self, table_uri: str) -> Storage:
        with self._lock:
            return self._storage_locked(table_uri)

    def _storage_locked(self, table_uri: str) -> Storage:
        """The table's storage, opened at the first request naming it (its URI resolved by
        the request validation) and kept: marker dirs need no table configuration or
        timeline, so the service opens no ``HoodieTable``."""
        storage = self._storages.get(table_uri)
        if storage is None:
            storage = self._storages[table_uri] = open_storage(table_uri)
        return storage

    def _answered(self, count: int) -> None:
        with self._lock:
            self._unanswered -= count

    def _forget(self, key: DirKey, state: MarkerDirState) -> None:
        with self._lock:
            if self._dirs.get(key) is state:
                del self._dirs[key]

    def _release(self, state: MarkerDirState) -> None:
        try:
            state.lease.release()
        except Exception as error:
            log.warning("lease release failed", instant=state.instant, error=str(error))

    def _dispatch_loop(self) -> None:
        interval = self.config.batch_interval_ms / 1000
        next_tick = time.monotonic()
        while True:
            next_tick += interval
            now = time.monotonic()
            if next_tick < now:
                next_tick = now
            if self._stop.wait(next_tick - now):
                return
            with self._lock:
                states = list(self._dirs.values())
            for state in states:
                batch = state.take_batch()
                if batch is not None:
                    self._pool.submit(state.process, batch)

    def _maintain_loop(self) -> None:
        period = min(1.0, self.config.lease_s / 6, self.config.idle_evict_s / 2)
        last_renewal = time.monotonic()
        while not self._stop.wait(period):
            renew = time.monotonic() - last_renewal >= self.config.lease_s / 3
            if renew:
                last_renewal = time.monotonic()
            with self._lock:
                states = list(self._dirs.items())
            for key, state in states:
                self._maintain(key, state, renew=renew)

    def _maintain(self, key: DirKey, state: MarkerDirState, *, renew: bool) -> None:
        if state.is_idle(self.config.idle_evict_s):
            state.close(
                UnavailableError(
                    "the marker dir was evicted while idle; retry", field="instant_time"
                )
            )
            self._release(state)
            self._forget(key, state)
            log.info("idle marker dir evicted", table=key[0], instant=key[1])
        elif state.opened and not state.lease.held:
            state.close(UnavailableError("lost the marker dir lease; retry", field="instant_time"))
            self._forget(key, state)
        elif renew and state.opened and not state.closed:
            try:
                state.lease.renew()
            except Exception as error:
                log.warning("lease renewal failed", instant=state.instant, error=str(error))


def _closing(instant: str) -> UnavailableError:
    return UnavailableError(
        f"the marker dir of {instant} is being deleted or evicted; retry", field="instant_time"
    )
