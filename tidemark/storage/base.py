"""The storage interface every table file, marker, lock and index shard goes through.

Paths are relative to the storage root (a table base path), '/'-separated, never
starting with '/'. Implementations count every request by operation so benchmarks can
report request counts; they retry throttling and transient errors only.
"""

from __future__ import annotations

import abc
import io
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import BinaryIO

DELETE_BATCH_SIZE = 1000
"""Keys per delete request: S3's DeleteObjects limit, used by both backends for counting."""


@dataclass(frozen=True)
class FileInfo:
    """One listed object: its path relative to the root, its size in bytes and when it was
    last written (seconds since the epoch; what an orphan's age is judged by when its name
    carries no instant). Listings compare by path and size."""

    path: str
    size: int
    modified_s: float = field(compare=False)


@dataclass(frozen=True)
class ListDirResult:
    """The immediate children of one folder: objects (with sizes) and sub-folder paths.

    Both are relative to the root and sorted; ``dirs`` have no trailing '/'. Nothing below
    a sub-folder is listed, so a folder holding a huge marker directory stays cheap.
    """

    files: tuple[FileInfo, ...]
    dirs: tuple[str, ...]

    @classmethod
    def from_unsorted(cls, files: Iterable[FileInfo], dirs: Iterable[str]) -> ListDirResult:
        return cls(tuple(sorted(files, key=lambda info: info.path)), tuple(sorted(dirs)))


@dataclass(frozen=True)
class PartialFile:
    """An unpublished temporary left by a writer killed mid-write, and the object path it
    was to become (rollback deletes it with the data files of the failed instant).
    ``modified_at`` (epoch seconds) tells a killed writer's from one being written now."""

    path: str
    target: str
    modified_at: float


class RequestCounter:
    """Thread-safe count of storage requests by operation name (e.g. 'put', 'list'), every
    attempt counted, and apart how many of them were retries of a failed attempt."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._retries: Counter[str] = Counter()

    def add(self, operation: str, n: int = 1) -> None:
        with self._lock:
            self._counts[operation] += n

    def add_retry(self, operation: str) -> None:
        with self._lock:
            self._retries[operation] += 1

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def retries(self) -> dict[str, int]:
        with self._lock:
            return dict(self._retries)

    def total(self) -> int:
        with self._lock:
            return sum(self._counts.values())

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()
            self._retries.clear()


class Storage(abc.ABC):
    """A root (local directory or S3 prefix) holding objects addressed by relative path."""

    uri: str
    """The root's one spelling (``canonical_uri``), whatever form it was opened from."""
    requests: RequestCounter

    @property
    @abc.abstractmethod
    def max_path_bytes(self) -> int:
        """The longest table-relative path (UTF-8 bytes) the storage can write under its
        root, temporaries included: writes check their paths against it up front."""

    @abc.abstractmethod
    def read(self, path: str) -> bytes:
        """Whole object; raises NotFoundError when absent."""

    @abc.abstractmethod
    def write(self, path: str, data: bytes) -> None:
        """Create or replace the whole object atomically (readers never see a partial)."""

    @abc.abstractmethod
    def create_if_absent(self, path: str, data: bytes) -> bool:
        """Write only if absent; True if this call created it, False if it existed."""

    @abc.abstractmethod
    def list(self, prefix: str) -> Iterator[FileInfo]:
        """Every object under ``prefix`` (recursively), paginated lazily."""

    @abc.abstractmethod
    def list_dir(self, directory: str) -> ListDirResult:
        """Immediate children of ``directory`` ('' is the root; a trailing '/' is optional).

        Counted as 'list' (one per page on S3). A missing folder lists as empty. Local
        storage may report empty sub-folders left by deletes; S3 has no empty folders.
        """

    @abc.abstractmethod
    def delete_many(self, paths: Iterable[str]) -> int:
        """Delete objects in batches (1000 per request on S3); returns how many."""

    @abc.abstractmethod
    def exists(self, path: str) -> bool:
        """Whether the object exists."""

    @abc.abstractmethod
    def size(self, path: str) -> int:
        """Object size in bytes; raises NotFoundError when absent."""

    @abc.abstractmethod
    def open_input(self, path: str) -> BinaryIO:
        """A seekable stream for reading large objects (Parquet footers, row groups)."""

    @abc.abstractmethod
    def read_range(self, path: str, start: int, length: int) -> bytes:
        """Bytes ``[start, start + length)`` of an object in one request (fewer at its end);
        raises NotFoundError when absent. Index shards read only the blocks they need."""

    @abc.abstractmethod
    def open_output(self, path: str) -> BinaryIO:
        """A stream whose content becomes visible as one object on close."""

    def partial_files(self, directory: str) -> tuple[PartialFile, ...]:
        """Temporaries in ``directory`` (not below it) of writes never published. Only local
        storage has them: an S3 object appears whole from one PUT, its upload spooled in an
        anonymous local file that disappears with the process."""
        return ()

    def delete(self, path: str) -> None:
        self.delete_many([path])

    def delete_prefix(self, prefix: str) -> int:
        """Delete everything under ``prefix``; returns how many objects."""
        return self.delete_many(info.path for info in self.list(prefix))


class PublishOnClose(io.BufferedWriter):
    """Buffered writer over a temporary file that becomes the object on ``close()``.

    Both backends give ``open_output`` this shape so a failed writer never leaves a
    partial object behind: leaving a ``with`` block by an exception discards the data.
    """

    def __init__(
        self,
        raw: io.FileIO,
        publish: Callable[[io.FileIO], None],
        discard: Callable[[], None],
        buffer_size: int = 1 << 20,
    ) -> None:
        super().__init__(raw, buffer_size)
        self._temp = raw
        self._publish = publish
        self._discard = discard
        self._discarding = False

    def close(self) -> None:
        if self.closed:
            return
        try:
            self.flush()
            if self._discarding:
                self._discard()
            else:
                self._publish(self._temp)
        finally:
            super().close()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._discarding = exc_type is not None
        self.close()
