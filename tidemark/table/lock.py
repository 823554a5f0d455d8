"""TableLock: one writer per table, via lease objects on the table's own storage.

Leases are numbered generations under ``.hoodie/.tidemark/lock/``. Taking the lock means
creating generation n+1 with create-if-absent, which only one contender can win, and is
allowed only when generation n is released or its lease has expired. The holder renews
its generation from a heartbeat thread; only the holder writes its generation, so plain
overwrites are safe on local disks and S3 alike.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from types import TracebackType

import structlog

from tidemark.errors import (
    ConflictError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
)
from tidemark.storage.base import Storage

log = structlog.get_logger(__name__)

LOCK_DIR = ".hoodie/.tidemark/lock"


@dataclass(frozen=True)
class Lease:
    owner: str
    token: str
    expires_at: float
    released: bool = False

    def is_live(self, now: float) -> bool:
        return not self.released and self.expires_at > now


@dataclass(frozen=True)
class LockHolder:
    """Proof that a caller holds a table's lock: the generation it took and its lease's
    token (random per lock, so it cannot be guessed from the generation number)."""

    generation: int
    token: str


class TableLock:
    """Context manager; ``acquire()`` raises ConflictError(field="table") naming the holder."""

    def __init__(
        self, storage: Storage, owner: str, lease_s: float = 60, *, heartbeat: bool = True
    ) -> None:
        if not owner:
            raise InvalidArgumentError("lock owner must be non-empty", field="owner")
        if lease_s <= 0:
            raise InvalidArgumentError(f"must be > 0, got {lease_s}", field="lease_s")
        self.storage = storage
        self.owner = owner
        self.lease_s = lease_s
        self.heartbeat = heartbeat
        self._token = uuid.uuid4().hex
        self._generation: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lost = threading.Event()

    def __enter__(self) -> TableLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()

    @property
    def held(self) -> bool:
        return self._generation is not None and not self.lost.is_set()

    @property
    def holder(self) -> LockHolder | None:
        """What this owner shows a service to prove it holds the lock (None if not held)."""
        if self._generation is None:
            return None
        return LockHolder(self._generation, self._token)

    @classmethod
    def check_holder(cls, storage: Storage, holder: LockHolder, *, field: str) -> None:
        """FailedPreconditionError(field) unless ``holder`` names the newest generation of
        the table's lock, with its token, neither released nor expired (a service checks
        this before acting for the lock holder)."""
        generation, lease = cls(storage, "holder-check", heartbeat=False)._latest()
        if (
            generation != holder.generation
            or lease is None
            or lease.token != holder.token
            or not lease.is_live(time.time())
        ):
            raise FailedPreconditionError(
                f"the caller does not hold the table lock of {storage.uri} "
                f"(generation {holder.generation} is not its live lease)",
                field=field,
            )

    def acquire(self) -> None:
        generation, lease = self._latest()
        now = time.time()
        if lease is not None and lease.is_live(now):
            raise ConflictError(
                f"table is locked by {lease.owner!r} until "
                f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(lease.expires_at))}",
                field="table",
            )
        claim = generation + 1
        if not self.storage.create_if_absent(self._path(claim), self._lease_bytes(now)):
            holder = self._read(claim)
            raise ConflictError(
                f"table is locked by {holder.owner if holder else 'another writer'!r}",
                field="table",
            )
        self._generation = claim
        self.lost.clear()
        self.storage.delete_many(self._path(g) for g in self._generations() if g < claim)
        if lease is not None and not lease.released:
            log.warning("lock.taken_over", previous_owner=lease.owner, owner=self.owner)
        log.info("lock.acquired", owner=self.owner, generation=claim)
        if self.heartbeat:
            self._stop.clear()
            self._thread = threading.Thread(target=self._renew_loop, daemon=True)
            self._thread.start()

    def release(self) -> None:
        if self._generation is None:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if not self._superseded():
            lease = Lease(self.owner, self._token, time.time(), released=True)
            self.storage.write(self._path(self._generation), _encode(lease))
        log.info("lock.released", owner=self.owner, generation=self._generation)
        self._generation = None

    def renew(self) -> None:
        """Extend the lease; marks the lock lost if another owner took it over."""
        if self._generation is None:
            return
        if self._superseded():
            self.lost.set()
            log.error("lock.lost", owner=self.owner, generation=self._generation)
            return
        self.storage.write(self._path(self._generation), self._lease_bytes(time.time()))

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.lease_s / 3):
            self.renew()
            if self.lost.is_set():
                return

    def _superseded(self) -> bool:
        return self._generation is not None and any(
            g > self._generation for g in self._generations()
        )

    def _lease_bytes(self, now: float) -> bytes:
        return _encode(Lease(self.owner, self._token, now + self.lease_s))

    def _latest(self) -> tuple[int, Lease | None]:
        generations = self._generations()
        if not generations:
            return 0, None
        latest = max(generations)
        return latest, self._read(latest)

    def _read(self, generation: int) -> Lease | None:
        try:
            return Lease(**json.loads(self.storage.read(self._path(generation))))
        except NotFoundError:
            return None
        except (ValueError, TypeError):
            log.warning("lock.unreadable_lease", generation=generation)
            return None

    def _generations(self) -> list[int]:
        prefix = f"{LOCK_DIR}/"
        return [
            int(info.path[len(prefix) :])
            for info in self.storage.list(prefix)
            if info.path[len(prefix) :].isdigit()
        ]

    @staticmethod
    def _path(generation: int) -> str:
        return f"{LOCK_DIR}/{generation:020d}"


def _encode(lease: Lease) -> bytes:
    return json.dumps(asdict(lease)).encode()
