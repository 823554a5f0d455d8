"""StorageLease: one holder at a time of a lock dir on the table's own storage.

Four kinds of lease use it: the table lock (one writer per table, ``locked.py``), a
clustering plan's run lease (``plan_run.py``), an index build's lease and the index
compaction lease (``tidemark/index``), each in its own lock dir.

Leases are numbered generations under ``.hoodie/.tidemark/lock/``. Taking the lock means
creating generation n+1 with create-if-absent, which only one contender can win, and is
allowed only when generation n is released or its lease has expired. A listing is not a
snapshot (a local directory read races creations and deletions: four processes taking
the lock in a tight loop had 23% of their claims built on a listing that missed the
holder), so a claim is checked by listing again once made: a newer generation there, or
the claim missing (a newer holder deleted it as old), means the claim was built on a
listing that missed the holder, and it is withdrawn. Generation n is deleted only when
n+2 is claimed, so a listing racing one hand-over still finds the previous one. The
holder renews its generation from a heartbeat thread; only the holder writes its
generation, so plain overwrites are safe on local disks and S3 alike.

Fencing: a holder whose renewals keep failing cannot know whether its lease ran out, so
after half a lease without a successful renewal it declares the lock lost (well before
another writer may take it over) and calls ``on_lost``. ``check()`` is the fencing token
every timeline transition asks for first: it proves, right before the write, that our
generation is still the newest lock object, carries our token and was renewed recently.

Fairness: contenders that wait are served in arrival order. A contender that finds the
lock held takes a ticket beside it (``<lock_dir>.queue/<time>-<token>``, renewed at each
poll, so a crashed waiter's ticket runs out), and nobody takes the lock while a live
ticket older than their own (or any, for one without a ticket) is queued. Without it, a
writer releasing and re-taking the lock in a loop won every hand-over against a waiter
polling with backoff, and a clustering run's commit starved until its ``--lock-wait-s``
ran out.

The same leases fence other exclusive runs under their own folder (``lock_dir``): a
clustering plan's run (``plan_run.py``) and a record index build each hold one, so two
never run at once and one paused past its lease commits nothing. The marker service's
lease of a marker dir (``tidemark.services.marker.lease.DirLease``) is one too: a subclass
that names the dir's owner and its address when refused, lets an owner take over its own
live generation, keeps its 10-digit generation names and gives up 0.2 of the lease.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from types import TracebackType

import structlog
from tenacity import RetryCallState

from tidemark.checks import require_non_negative, require_positive
from tidemark.clock import SYSTEM_CLOCK, Clock
from tidemark.errors import (
    ConflictError,
    DataLossError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    TidemarkError,
    with_note,
)
from tidemark.retrying import waiting_for_holder
from tidemark.storage.base import Storage
from tidemark.storage.damaged import read_parsed

log = structlog.get_logger(__name__)

LOCK_DIR = ".hoodie/.tidemark/lock"
RENEWALS_PER_LEASE = 6
"""Heartbeat ticks per lease: a renewal failing after its storage retries is tried again
on the next tick, several times before the safety margin runs out."""
STALE_TEMPORARY_S = 60.0
"""Age past which a temporary in the lock dir is a killed process's: a younger one may be
another contender's claim being written right now, which must not be pulled from under it."""
DEFAULT_LOCK_LEASE_S = 60.0
"""Lease of a lock (``--lock-lease-s``), renewed ``RENEWALS_PER_LEASE`` times per lease."""
DEFAULT_LOCK_WAIT_S = 120.0
"""How long taking a lock waits for its holder (``--lock-wait-s``; 0 fails at once)."""
FIRST_POLL_S = 0.2
MAX_POLL_S = 5.0
"""Polls of a held lock back off from the first to the last, jittered
(``tidemark.retrying.waiting_for_holder``), so waiting contenders do not list the lock
folder in step."""
UNREADABLE_LEASE = "delete it once no process of the table is running, to free the lock"
QUEUE_SUFFIX = ".queue"
"""Folder beside the lock's holding the waiters' tickets."""
MIN_TICKET_S = 4 * MAX_POLL_S
"""A ticket lives at least this long past its last renewal (waiters renew at each poll)."""
SAFETY_MARGIN = 0.5
"""Fraction of the lease after which a holder that could not renew counts its lock as lost:
the other half covers clock skew between writers and stopping the tasks."""


@dataclass(frozen=True)
class Lease:
    """A generation's record: its holder (``token`` is empty in a marker dir lease written
    before the marker service's leases were StorageLeases), until when (epoch seconds),
    and where the holder is reached (a marker service replica's address; else empty)."""

    owner: str
    token: str
    expires_at: float
    released: bool = False
    address: str = ""

    def is_live(self, now: float) -> bool:
        return not self.released and self.expires_at > now

    @property
    def ends(self) -> str:
        """When the lease ends, in UTC, as errors and logs print it."""
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.expires_at))


@dataclass(frozen=True)
class LockHolder:
    """Proof that a caller holds a table's lock: the generation it took and its lease's
    token (random per lock, so it cannot be guessed from the generation number)."""

    generation: int
    token: str


class StorageLease:
    """An exclusive, renewed lease on ``lock_dir`` (default: the table lock's). Context
    manager; ``acquire()`` raises ConflictError(field="table") naming the holder.

    ``on_lost`` runs (on the heartbeat thread) once when the lock is found lost, e.g. to
    cancel the writer's Spark jobs. ``clock`` dates the leases and times the safety margin
    (tests advance it rather than sleep); waiting for a holder takes real time. A subclass
    changes the class attributes below and ``_held_error``."""

    GENERATION_DIGITS = 20
    """Width of the generation names (zero-padded, so they list in order)."""
    FIRST_GENERATION = 1
    SAFETY_MARGIN = SAFETY_MARGIN
    TAKES_OVER_OWN = False
    """Whether a generation of this owner counts as free (an owner that keeps one holder
    per lock dir by itself, and may have lost track of an older one)."""
    address = ""
    """Where the holder is reached, written in its generations."""

    def __init__(
        self,
        storage: Storage,
        owner: str,
        lease_s: float = DEFAULT_LOCK_LEASE_S,
        *,
        heartbeat: bool = True,
        on_lost: Callable[[], None] | None = None,
        lock_dir: str = LOCK_DIR,
        subject: str = "table",
        field: str = "table",
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if not owner:
            raise InvalidArgumentError("lock owner must be non-empty", field="owner")
        require_positive("lease_s", lease_s)
        self.storage = storage
        self.owner = owner
        self.lease_s = lease_s
        self.heartbeat = heartbeat
        self.lock_dir = lock_dir
        self._subject = subject
        """What the lock guards, as its errors name it."""
        self._field = field
        """The field a held lock's ConflictError names."""
        self._clock = clock
        self._token = uuid.uuid4().hex
        self._generation: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._on_lost = on_lost
        self._renewed_at = 0.0
        self._lost_reason = ""
        self._losing = threading.Lock()
        self.lost = threading.Event()
        self.waited_s = 0.0
        """How long the last ``acquire`` waited for the lock (a job reports it)."""

    def __enter__(self) -> StorageLease:
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
        """Taken, not found lost, and renewed within the safety margin."""
        return (
            self._generation is not None and not self.lost.is_set() and not self._renewal_overdue()
        )

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

    def live_lease(self) -> Lease | None:
        """The newest generation's lease if it is live (someone holds the lock), else None."""
        _, lease = self._latest()
        return lease if lease is not None and lease.is_live(self._clock.now()) else None

    def acquire(self, wait_s: float = 0.0) -> None:
        """Take the lock, waiting up to ``wait_s`` for a live holder: its owner and lease
        end are logged once, then the lock is polled with backoff; a lease that expires
        meanwhile is taken over. Past the wait, the ConflictError of a held lock."""
        check_lock_wait(wait_s)
        began = time.monotonic()
        ticket: str | None = None

        def queue(state: RetryCallState) -> None:
            """Take a place in the queue (logging the holder once), or keep it."""
            nonlocal ticket
            if ticket is None:
                held = state.outcome.exception() if state.outcome else None
                log.warning("lock.waiting", owner=self.owner, wait_s=wait_s, held=str(held))
            ticket = self._renew_ticket(ticket)

        waiting = waiting_for_holder(
            wait_s, first_s=FIRST_POLL_S, max_s=MAX_POLL_S, before_sleep=queue
        )
        try:
            for attempt in waiting:
                with attempt:
                    self._wait_turn(ticket)
                    self._try_acquire()
        except ConflictError as held:
            if ticket is not None:
                raise with_note(held, f"waited {wait_s:g} s") from None
            raise
        finally:
            self.waited_s = time.monotonic() - began
            if ticket is not None:
                self._drop_ticket(ticket)

    def _renew_ticket(self, ticket: str | None) -> str:
        """Take a place in the queue (``ticket`` None) or keep it; returns its path."""
        path = ticket or f"{self.lock_dir}{QUEUE_SUFFIX}/{time.time_ns():020d}-{self._token}"
        expires_at = self._clock.now() + max(self.lease_s, MIN_TICKET_S)
        self.storage.write(path, _encode(self._lease(expires_at)))
        return path

    def _drop_ticket(self, ticket: str) -> None:
        try:
            self.storage.delete(ticket)
        except TidemarkError as error:  # it runs out on its own
            log.warning("lock.ticket_left", owner=self.owner, error=str(error))

    def _wait_turn(self, ticket: str | None) -> None:
        """ConflictError while a live ticket older than ``ticket`` (any, without one) is
        queued: those waiters take the lock first."""
        prefix = f"{self.lock_dir}{QUEUE_SUFFIX}/"
        now = self._clock.now()
        for info in self.storage.list(prefix):
            if ticket is not None and info.path >= ticket:
                break
            try:
                waiter = read_parsed(self.storage, info.path, _decode, UNREADABLE_LEASE)
            except (NotFoundError, DataLossError):
                continue  # taken the lock meanwhile, or a torn ticket: not a waiter
            if waiter.is_live(now):
                raise ConflictError(
                    f"{self._subject} is awaited first by {waiter.owner!r}", field=self._field
                )

    def _held_error(self, holder: Lease | None) -> ConflictError:
        """The error of a lock that ``holder`` holds (None: a holder not read)."""
        if holder is None:
            return ConflictError(
                f"{self._subject} is locked by 'another writer'", field=self._field
            )
        return ConflictError(
            f"{self._subject} is locked by {holder.owner!r} until {holder.ends}", field=self._field
        )

    def _try_acquire(self) -> None:
        generation, lease = self._latest()
        now = self._clock.now()
        own = self.TAKES_OVER_OWN and lease is not None and lease.owner == self.owner
        if lease is not None and lease.is_live(now) and not own:
            raise self._held_error(lease)
        claim = generation + 1
        started = self._clock.monotonic()
        if not self.storage.create_if_absent(self._path(claim), self._lease_bytes(now)):
            raise self._held_error(self._read(claim))
        generations = self._generations()
        if _outdated(claim, generations):  # the claim rested on a listing that missed the holder
            self.storage.delete(self._path(claim))
            raise self._held_error(self._read(max(generations)) if generations else None)
        self._generation = claim
        self._renewed_at = started
        self.lost.clear()
        stale_before = time.time() - STALE_TEMPORARY_S
        self.storage.delete_many(  # and temporaries of claims and renewals killed holders left
            [
                *(self._path(g) for g in generations if g < claim - 1),
                *(
                    partial.path
                    for partial in self.storage.partial_files(self.lock_dir)
                    if partial.modified_at < stale_before
                ),
            ]
        )
        if lease is not None and not lease.released and lease.owner != self.owner:
            self._taken_over(lease)
        log.info("lock.acquired", lock_dir=self.lock_dir, owner=self.owner, generation=claim)
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
        if self.lost.is_set():
            log.warning("lock.not_released", owner=self.owner, reason=self._lost_reason)
        elif not self._superseded():  # ended at 0 too, for readers that predate ``released``
            lease = self._lease(0.0, released=True)
            self.storage.write(self._path(self._generation), _encode(lease))
        log.info("lock.released", owner=self.owner, generation=self._generation)
        self._generation = None

    def renew(self) -> None:
        """Extend the lease; marks the lock lost if another owner took it over."""
        if self._generation is None:
            return
        if self._superseded():
            self._mark_lost("another writer took the lock over")
            return
        started = self._clock.monotonic()
        self.storage.write(self._path(self._generation), self._lease_bytes(self._clock.now()))
        self._renewed_at = started

    def check(self) -> None:
        """The fencing token: raise ConflictError(field="lock") unless we provably still
        hold the lock, i.e. our generation is the newest, carries our token and was
        renewed within the safety margin. Call it right before every state change."""
        if self._generation is None:
            raise ConflictError("the table lock is not held", field="lock")
        if not self.lost.is_set() and self._renewal_overdue():
            self._mark_lost(f"no lease renewal for over {self._margin_s():g} s")
        if not self.lost.is_set():
            try:
                latest, lease = self._latest()
            except TidemarkError as error:
                self._mark_lost(f"the lock could not be read ({error})")
            else:
                if latest != self._generation or lease is None or lease.token != self._token:
                    self._mark_lost("another writer took the lock over")
        if self.lost.is_set():
            raise self.lost_error()

    def lost_error(self) -> ConflictError:
        """The one-line error a writer that lost its lock ends with."""
        return ConflictError(
            f"lost the {self._subject} lock (generation {self._generation}, owner {self.owner!r}): "
            f"{self._lost_reason}; nothing was committed after that",
            field="lock",
        )

    def _renew_loop(self) -> None:
        """Renew on every tick; a failed renewal is retried on the next one, and the lock
        counts as lost once none succeeded within the safety margin."""
        failure = ""
        while not self._stop.wait(self.lease_s / RENEWALS_PER_LEASE):
            try:
                self.renew()
                failure = ""
            except Exception as error:  # any failure: the heartbeat must outlive it
                log.warning("lock.renewal_failed", owner=self.owner, error=str(error))
                failure = f" (the last renewal failed: {error})"
            if not self.lost.is_set() and self._renewal_overdue():
                self._mark_lost(f"no lease renewal for over {self._margin_s():g} s{failure}")
            if self.lost.is_set():
                return

    def _taken_over(self, previous: Lease) -> None:
        """We took the lock of another owner whose lease ran out."""
        log.warning("lock.taken_over", previous_owner=previous.owner, owner=self.owner)

    def _margin_s(self) -> float:
        return self.lease_s * self.SAFETY_MARGIN

    def _renewal_overdue(self) -> bool:
        return self._clock.monotonic() - self._renewed_at > self._margin_s()

    def _mark_lost(self, reason: str) -> None:
        with self._losing:
            if self.lost.is_set():
                return
            self._lost_reason = reason
            self.lost.set()
        log.error("lock.lost", owner=self.owner, generation=self._generation, reason=reason)
        if self._on_lost is not None:
            self._on_lost()

    def _superseded(self) -> bool:
        """Another owner took the lock over: a newer generation exists, or ours is gone
        (taken over and cleaned up, or a finished run's leases deleted)."""
        if self._generation is None:
            return False
        return _outdated(self._generation, self._generations())

    def _lease(self, expires_at: float, *, released: bool = False) -> Lease:
        return Lease(self.owner, self._token, expires_at, released, self.address)

    def _lease_bytes(self, now: float) -> bytes:
        return _encode(self._lease(now + self.lease_s))

    def _latest(self) -> tuple[int, Lease | None]:
        generations = self._generations()
        if not generations:
            return self.FIRST_GENERATION - 1, None
        latest = max(generations)
        return latest, self._read(latest)

    def _read(self, generation: int) -> Lease | None:
        """The lease of ``generation`` (None: gone). One that does not decode is a
        DataLossError naming it: whose lock it was and until when is unknown, so it is
        never taken over (and its holder's ``check`` fails) until someone removes it."""
        try:
            return read_parsed(self.storage, self._path(generation), _decode, UNREADABLE_LEASE)
        except NotFoundError:
            return None

    def _generations(self) -> list[int]:
        prefix = f"{self.lock_dir}/"
        return [
            int(info.path[len(prefix) :])
            for info in self.storage.list(prefix)
            if info.path[len(prefix) :].isdigit()
        ]

    def _path(self, generation: int) -> str:
        return f"{self.lock_dir}/{generation:0{self.GENERATION_DIGITS}d}"


def check_lock_wait(wait_s: float) -> None:
    """InvalidArgumentError(field="lock_wait_s") unless it is a number of seconds >= 0."""
    require_non_negative("lock_wait_s", wait_s)


def _outdated(generation: int, generations: list[int]) -> bool:
    """A newer generation is listed, or ours is not (deleted by a newer holder)."""
    return generation not in generations or max(generations) > generation


def _encode(lease: Lease) -> bytes:
    return json.dumps(asdict(lease)).encode()


def _decode(data: bytes) -> Lease:
    fields = json.loads(data)
    if not isinstance(fields, dict):
        raise ValueError(f"not a lease: {data[:100]!r}")
    lease = Lease(
        owner=fields["owner"],
        token=fields.get("token", ""),
        expires_at=fields["expires_at"],
        released=fields.get("released", False),
        address=fields.get("address", ""),
    )
    if not isinstance(lease.expires_at, int | float) or not all(
        isinstance(text, str) for text in (lease.owner, lease.token, lease.address)
    ):
        raise ValueError(f"not a lease: {data[:100]!r}")
    return lease
