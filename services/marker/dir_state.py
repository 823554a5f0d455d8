"""State of one marker dir: its markers in memory, its MARKERS files and pending requests.

The storage format is Hudi's timeline-server-based one, byte for byte: ``MARKERS<i>``
holds each marker name followed by ``\\n`` (the whole file is rewritten on each flush),
and ``MARKERS.type`` holds ``TIMELINE_SERVER_BASED`` without a newline. A marker is
in ``markers`` only once a flush holding it succeeded, so a failed flush leaves no
trace in memory and nothing unflushed is ever acknowledged.

Concurrency: one batch per file at a time (round robin over free files); several files
of one dir flush in parallel. A marker being flushed by one batch is "in flight"; a
request for it in a later batch is answered (``False``) only when that flush succeeds.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

import structlog

from tidemark.clock import SYSTEM_CLOCK, Clock
from tidemark.errors import DataLossError, UnavailableError
from tidemark.services.marker.lease import DirLease
from tidemark.services.marker.waiters import Outcome, PendingCreate, answer_all
from tidemark.storage.base import Storage
from tidemark.storage.damaged import read_parsed
from tidemark.table.writes.markers import (
    MARKER_INFIX,
    MARKERS_TYPE_FILE,
    TIMELINE_SERVER_BASED,
    marker_dir,
    parse_markers_file,
)

log = structlog.get_logger(__name__)

MARKERS_FILE_PREFIX = "MARKERS"
_MARKERS_FILE = re.compile(r"MARKERS(\d+)")


def markers_file_content(names: Sequence[str]) -> bytes:
    """Hudi's layout: every marker followed by a newline, UTF-8."""
    return "".join(f"{name}\n" for name in names).encode()


@dataclass(frozen=True)
class DirListing:
    """One listing of a marker dir: MARKERS<i> paths by index, direct markers, MARKERS.type."""

    markers_files: dict[int, str]
    direct_markers: set[str]
    has_type_file: bool


def list_marker_dir(storage: Storage, directory: str) -> DirListing:
    prefix = directory + "/"
    files: dict[int, str] = {}
    direct: set[str] = set()
    has_type = False
    for info in storage.list(prefix):
        relative = info.path[len(prefix) :]
        match = _MARKERS_FILE.fullmatch(relative)
        if match:
            files[int(match.group(1))] = info.path
        elif relative == MARKERS_TYPE_FILE:
            has_type = True
        elif MARKER_INFIX in relative:
            direct.add(relative)
    return DirListing(files, direct, has_type)


def read_markers_files(storage: Storage, listing: DirListing) -> dict[int, list[str]]:
    """Names in each MARKERS<i> file, by index."""
    return {
        index: read_parsed(storage, path, parse_markers_file)
        for index, path in listing.markers_files.items()
    }


@dataclass
class Batch:
    """The requests drained at one tick for one file of one dir."""

    file_index: int
    requests: list[PendingCreate]


class MarkerDirState:
    """Markers of one (table, instant). ``open`` takes the lease and loads MARKERS files."""

    def __init__(
        self,
        storage: Storage,
        instant: str,
        num_files: int,
        lease: DirLease,
        *,
        on_answered: Callable[[int], None],
        on_flushed: Callable[[float, int, bool], None],
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.storage = storage
        self.instant = instant
        self.directory = marker_dir(instant)
        self.lease = lease
        self.num_files = num_files
        self._on_answered = on_answered
        self._on_flushed = on_flushed
        """Called with (seconds, new markers, succeeded) after each MARKERS file write."""
        self._clock = clock
        """Times how long the dir was idle (a test steps it past ``idle_evict_s``)."""
        self.last_used = clock.monotonic()
        self._lock = threading.Lock()
        self._open_lock = threading.Lock()
        self._opened = False
        self._closed: Exception | None = None
        self._markers: set[str] = set()
        self._file_contents: dict[int, bytes] = {}
        self._busy = [False] * num_files
        self._last_index = -1
        self._pending: list[PendingCreate] = []
        self._in_flight: dict[str, Future[None]] = {}
        self._idle = threading.Condition(self._lock)
        self._type_written = False

    @property
    def opened(self) -> bool:
        return self._opened

    @property
    def closed(self) -> bool:
        return self._closed is not None

    def open(self) -> None:
        """Take the lease and load the dir once (lazily, on first use); raises
        NotOwnerError when another live owner holds the dir."""
        with self._open_lock:
            if self._opened:
                return
            self.lease.acquire()
            listing = list_marker_dir(self.storage, self.directory)
            try:
                files = read_markers_files(self.storage, listing)
            except DataLossError:
                self.lease.abandon()  # refused: the dir is left as it was found
                raise
            with self._lock:
                for index, names in files.items():
                    self._file_contents[index] = markers_file_content(list(dict.fromkeys(names)))
                    self._markers.update(names)
                self._type_written = listing.has_type_file
                self._opened = True
            log.info(
                "marker dir loaded",
                instant=self.instant,
                markers=len(self._markers),
                files=len(files),
            )

    def enqueue(self, request: PendingCreate) -> bool:
        """Queue a create; False if the state was closed meanwhile."""
        with self._lock:
            if self._closed is not None:
                return False
            self._pending.append(request)
            self.last_used = self._clock.monotonic()
            return True

    def snapshot(self) -> set[str]:
        """Every acknowledged marker."""
        with self._lock:
            self.last_used = self._clock.monotonic()
            return set(self._markers)

    def is_idle(self, idle_s: float) -> bool:
        with self._lock:
            quiet = self._clock.monotonic() - self.last_used >= idle_s
            return quiet and not self._pending and not any(self._busy)

    def take_batch(self) -> Batch | None:
        """Drain pending requests into a batch for the next free file, round robin."""
        with self._lock:
            if not self._pending or self._closed is not None:
                return None
            for step in range(1, self.num_files + 1):
                index = (self._last_index + step) % self.num_files
                if not self._busy[index]:
                    self._busy[index] = True
                    self._last_index = index
                    batch = Batch(index, self._pending)
                    self._pending = []
                    return batch
            return None

    def process(self, batch: Batch) -> None:
        """Dedup, flush the batch's file, then answer its requests (worker thread)."""
        flushed: Future[None] = Future()
        results: list[list[bool]] = []
        waits: list[set[Future[None]]] = []
        new_names: list[str] = []
        with self._lock:
            for request in batch.requests:
                answer: list[bool] = []
                depends: set[Future[None]] = set()
                for name in request.names:
                    owner = self._in_flight.get(name)
                    if name in self._markers:
                        answer.append(False)
                    elif owner is not None:
                        depends.add(owner)
                        answer.append(False)
                    else:
                        self._in_flight[name] = flushed
                        depends.add(flushed)
                        new_names.append(name)
                        answer.append(True)
                results.append(answer)
                waits.append(depends)
        started = time.perf_counter()
        ok = False
        try:
            self._flush(batch.file_index, new_names)
            flushed.set_result(None)
            ok = True
        except Exception as error:
            log.warning(
                "marker flush failed", instant=self.instant, file=batch.file_index, error=str(error)
            )
            flushed.set_exception(error)
        finally:
            with self._lock:
                for name in new_names:
                    del self._in_flight[name]
                self._busy[batch.file_index] = False
                self._idle.notify_all()
        if new_names:
            self._on_flushed(time.perf_counter() - started, len(new_names), ok)
        # the slots are freed before the answers go out, so a client that has its answer
        # never finds its own markers still counted against the queue limit
        self._on_answered(sum(len(request.names) for request in batch.requests))
        answer_all(
            [
                (request, _outcome(answer, depends))
                for request, answer, depends in zip(batch.requests, results, waits, strict=True)
            ]
        )

    def close(self, reason: Exception) -> None:
        """Refuse new requests, fail queued ones with ``reason``, wait for running flushes."""
        with self._lock:
            if self._closed is None:
                self._closed = reason
            pending, self._pending = self._pending, []
            while any(self._busy):
                self._idle.wait()
        self._on_answered(sum(len(request.names) for request in pending))
        answer_all([(request, reason) for request in pending])

    def _flush(self, index: int, new_names: list[str]) -> None:
        """Write MARKERS.type once and the batch's whole file; commit to memory on success.
        The file's bytes are kept, so a flush encodes only its new names."""
        if not new_names:
            return
        if not self.lease.held:
            raise UnavailableError(
                f"lost the lease of the marker dir of {self.instant}; retry", field="instant_time"
            )
        if not self._type_written:
            self.storage.write(
                f"{self.directory}/{MARKERS_TYPE_FILE}", TIMELINE_SERVER_BASED.encode()
            )
            self._type_written = True
        with self._lock:
            content = self._file_contents.get(index, b"") + markers_file_content(new_names)
        self.storage.write(f"{self.directory}/{MARKERS_FILE_PREFIX}{index}", content)
        with self._lock:
            self._file_contents[index] = content
            self._markers.update(new_names)


def _outcome(answer: list[bool], depends: set[Future[None]]) -> Outcome:
    """The answer once every flush it relies on succeeded, else the first error."""
    for dependency in depends:
        error = dependency.exception()
        if error is not None:
            return error
    return answer
