"""Ownership lease of one marker dir, so only one live process rewrites its MARKERS files.

A MARKERS file is rewritten whole on every flush, so two writers of one dir (a second
replica, or a zombie that lost its lease) would silently drop each other's markers.
The lease is the table lock's kind, a ``StorageLease`` (generation objects taken with a
conditional put: whoever creates generation ``n + 1`` after generation ``n`` expired owns
the dir, and only one contender can create it), renewed by the engine rather than a
heartbeat thread. The owner stops writing a safety margin before the expiry it wrote
(``held`` turns false), so clock skew below that margin is harmless.

What differs from the table lock: nobody queues for a dir; a renewal landing past the
margin loses it; a refused dir names its owner and the address its clients reach it at
(``NotOwnerError``, which clients follow); an owner may take a newer
generation over its own live one (its engine keeps at most one open state per marker
dir); the generations keep their 10-digit names from 0 (replicas of an earlier release
list the same dir); and the owner gives up only the last 0.2 of the lease, as the engine
renews every third of it.

The objects live under ``marker_lease_dir(instant)``
(``.hoodie/.aux/tidemark/marker-leases/<instant>/``), outside the marker dir: Hudi's
marker readers, its marker-dir listing and ours never see them.
"""

from __future__ import annotations

from collections.abc import Callable

from tidemark.clock import SYSTEM_CLOCK, Clock
from tidemark.errors import ConflictError, NotOwnerError
from tidemark.storage.base import Storage
from tidemark.table.leases.storage_lease import Lease, StorageLease
from tidemark.table.writes.markers import marker_lease_dir


class DirLease(StorageLease):
    """The lease of one marker dir as seen by one owner; not thread-safe (callers lock).

    ``owner`` is unique per process. ``address`` is where clients reach the owner: a
    replica refused the dir names the owner's, so the client asks it instead. ``clock``
    dates the generations and times the local deadline. ``on_takeover`` runs when this
    owner takes over a dir whose other owner's lease ran out."""

    GENERATION_DIGITS = 10
    FIRST_GENERATION = 0
    SAFETY_MARGIN = 0.8
    TAKES_OVER_OWN = True

    def __init__(
        self,
        storage: Storage,
        instant: str,
        owner: str,
        lease_s: float,
        *,
        address: str = "",
        clock: Clock = SYSTEM_CLOCK,
        on_takeover: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(
            storage,
            owner,
            lease_s,
            heartbeat=False,
            lock_dir=marker_lease_dir(instant),
            subject=f"marker dir of instant {instant}",
            field="instant_time",
            clock=clock,
        )
        self.instant = instant
        self.address = address
        self._on_takeover = on_takeover

    def acquire(self, wait_s: float = 0.0) -> None:
        """Take the lease (new, expired or already ours: then renewed); NotOwnerError names
        a live owner and its address."""
        if self.held:
            self.renew()
            if self.held:
                return
        super().acquire(wait_s)

    def renew(self) -> None:
        """Extend the lease; one that lands past the margin loses it: ``held`` (no listing)
        fences the dir's writes, and the dir may have changed hands meanwhile."""
        renewed_at = self._renewed_at
        super().renew()
        if self.held and self._clock.monotonic() - renewed_at > self._margin_s():
            self._mark_lost(f"the renewal landed after {self._margin_s():g} s without one")

    def abandon(self) -> None:
        """Delete the generation ``acquire`` just created, as if it never ran (the dir
        turned out unusable before anything was written under the lease)."""
        if self._generation is not None:
            self.storage.delete(self._path(self._generation))
        self._generation = None

    def delete(self) -> None:
        """Remove every generation object; only the owner does this, with the marker dir."""
        self.storage.delete_prefix(self.lock_dir + "/")
        self._generation = None

    def _wait_turn(self, ticket: str | None) -> None:
        """Nobody queues for a marker dir (a replica refuses at once, naming the owner, and
        the client polls), so there is no queue to list."""

    def _held_error(self, holder: Lease | None) -> ConflictError:
        if holder is None:
            return NotOwnerError(f"{self._subject} is owned by another replica", field=self._field)
        remaining = max(0.0, holder.expires_at - self._clock.now())
        where = f" at {holder.address}" if holder.address else ""
        return NotOwnerError(
            f"{self._subject} is owned by {holder.owner}{where} "
            f"(lease expires in {remaining:.1f}s)",
            field=self._field,
            owner=holder.address,
        )

    def _taken_over(self, previous: Lease) -> None:
        super()._taken_over(previous)
        if self._on_takeover is not None:
            self._on_takeover()
