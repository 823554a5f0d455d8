"""Ownership lease of one marker dir, so only one live process rewrites its MARKERS files.

A MARKERS file is rewritten whole on every flush, so two writers of one dir (a second
replica, or a zombie that lost its lease) would silently drop each other's markers.
The lease is a sequence of generation objects taken with a conditional put: whoever
creates generation ``n + 1`` after generation ``n`` expired owns the dir, and only one
contender can create it. The owner renews its generation in place and stops writing a
safety margin before the expiry it wrote, so clock skew below that margin is harmless.

The objects live under ``marker_lease_dir(instant)``
(``.hoodie/.aux/tidemark/marker-leases/<instant>/``), outside the marker dir: Hudi's
marker readers, its marker-dir listing and ours never see them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from tidemark.clock import SYSTEM_CLOCK, Clock
from tidemark.errors import NotOwnerError
from tidemark.storage.base import Storage
from tidemark.storage.damaged import read_parsed
from tidemark.table.leases.storage_lease import UNREADABLE_LEASE
from tidemark.table.writes.markers import marker_lease_dir

log = structlog.get_logger(__name__)

GENERATION_DIGITS = 10
SAFETY_FRACTION = 0.2
"""Part of the lease the owner gives up at the end, to absorb clock skew and slow writes."""


@dataclass(frozen=True)
class LeaseRecord:
    """Content of a generation object: who owns it, until when (epoch seconds), and the
    address its clients reach it at (empty for a process no other client can reach,
    and in records written before replicas named theirs)."""

    owner: str
    expires_at: float
    address: str = ""

    def to_bytes(self) -> bytes:
        return json.dumps(
            {"owner": self.owner, "expires_at": self.expires_at, "address": self.address}
        ).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> LeaseRecord:
        fields = json.loads(data)
        return cls(
            owner=str(fields["owner"]),
            expires_at=float(fields["expires_at"]),
            address=str(fields.get("address", "")),
        )


class DirLease:
    """The lease of one marker dir as seen by one owner; not thread-safe (callers lock).

    ``owner`` is unique per process; an owner may take a newer generation over its own
    live one, because its engine keeps at most one open state per marker dir. ``address``
    is where clients reach the owner: a replica refused the dir names the owner's, so the
    client asks it instead. ``clock`` dates the generations and times the local deadline.
    """

    def __init__(
        self,
        storage: Storage,
        instant: str,
        owner: str,
        duration_s: float,
        *,
        address: str = "",
        clock: Clock = SYSTEM_CLOCK,
        on_takeover: Callable[[], None] | None = None,
    ) -> None:
        self.storage = storage
        self.instant = instant
        self.owner = owner
        self.address = address
        self.duration_s = duration_s
        self._clock = clock
        self._on_takeover = on_takeover
        """Called when this owner takes over a dir whose other owner's lease ran out."""
        self._generation: int | None = None
        self._deadline = 0.0

    @property
    def held(self) -> bool:
        """True while this owner may write: before its local deadline."""
        return self._generation is not None and self._clock.monotonic() < self._deadline

    def acquire(self) -> None:
        """Take the lease (new, expired or already ours); NotOwnerError names a live owner
        and its address."""
        latest = self._latest()
        if latest is None:
            target = 0
        else:
            generation, record = latest
            if record.owner == self.owner and generation == self._generation and self.held:
                self._extend(generation)
                return
            if record.owner != self.owner and record.expires_at > self._clock.now():
                raise self._owned_by(record)
            target = generation + 1
        started = self._clock.monotonic()
        record = self._record(self._clock.now() + self.duration_s)
        if not self.storage.create_if_absent(self._path(target), record.to_bytes()):
            raise self._owned_by(self._read(target))
        self._generation = target
        self._deadline = started + self.duration_s * (1 - SAFETY_FRACTION)
        log.info("marker dir lease acquired", instant=self.instant, generation=target)
        if latest is not None and latest[1].owner != self.owner and latest[1].expires_at > 0:
            log.warning("marker dir taken over", instant=self.instant, previous=latest[1].owner)
            if self._on_takeover is not None:
                self._on_takeover()

    def renew(self) -> None:
        """Extend a held lease; a renewal that lands after the deadline loses the lease,
        and so does finding our generation gone or superseded: a writer holding the
        table lock deleted the dir (rolled its instant back), so we give it up."""
        if self._generation is None:
            return
        latest = self._latest()
        if latest is None or latest[0] != self._generation or latest[1].owner != self.owner:
            log.warning(
                "marker dir lease given up: the dir was deleted or taken over",
                instant=self.instant,
                generation=self._generation,
            )
            self._generation = None
            return
        self._extend(self._generation)

    def _extend(self, generation: int) -> None:
        started = self._clock.monotonic()
        record = self._record(self._clock.now() + self.duration_s)
        self.storage.write(self._path(generation), record.to_bytes())
        if self._clock.monotonic() < self._deadline:
            self._deadline = started + self.duration_s * (1 - SAFETY_FRACTION)
        else:
            log.warning("marker dir lease lost", instant=self.instant, generation=self._generation)
            self._generation = None

    def release(self) -> None:
        """Mark our generation expired so the next owner need not wait out the lease."""
        if self._generation is None:
            return
        if self.held:
            self.storage.write(self._path(self._generation), self._record(0.0).to_bytes())
        self._generation = None

    def abandon(self) -> None:
        """Delete the generation ``acquire`` just created, as if it never ran (the dir
        turned out unusable before anything was written under the lease)."""
        if self._generation is not None:
            self.storage.delete(self._path(self._generation))
        self._generation = None

    def delete(self) -> None:
        """Remove every generation object; only the owner does this, with the marker dir."""
        self.storage.delete_prefix(marker_lease_dir(self.instant) + "/")
        self._generation = None

    def _latest(self) -> tuple[int, LeaseRecord] | None:
        prefix = marker_lease_dir(self.instant) + "/"
        generations = [
            int(name)
            for name in (info.path[len(prefix) :] for info in self.storage.list(prefix))
            if name.isdigit()
        ]
        if not generations:
            return None
        generation = max(generations)
        return generation, self._read(generation)

    def _read(self, generation: int) -> LeaseRecord:
        """DataLossError naming the object when it does not decode: its owner is
        unknown, so the dir is not taken over until someone removes it."""
        return read_parsed(
            self.storage, self._path(generation), LeaseRecord.from_bytes, UNREADABLE_LEASE
        )

    def _record(self, expires_at: float) -> LeaseRecord:
        return LeaseRecord(self.owner, expires_at, self.address)

    def _path(self, generation: int) -> str:
        return f"{marker_lease_dir(self.instant)}/{generation:0{GENERATION_DIGITS}d}"

    def _owned_by(self, record: LeaseRecord) -> NotOwnerError:
        remaining = max(0.0, record.expires_at - self._clock.now())
        where = f" at {record.address}" if record.address else ""
        return NotOwnerError(
            f"marker dir of instant {self.instant} is owned by {record.owner}{where} "
            f"(lease expires in {remaining:.1f}s)",
            field="instant_time",
            owner=record.address,
        )
