"""Several replicas of the index service behind one client: routing by shard, failover.

The index service address may list replicas, ``host0:port,host1:port,...`` (a
StatefulSet's per-pod names). Each shard of a table ranks the replicas by rendezvous
hashing of (table, shard, replica address): the first is the shard's owner, so each
replica's block cache holds only its own shards' blocks, and as the rest of the ranking
differs per shard, a down replica's shards spread evenly over the others. Any replica
can answer for any shard (the index lives on shared storage): routing only keeps the
caches apart, so a client routing by a stale shard count is still exact.

A replica whose call fails with UNAVAILABLE, DEADLINE_EXCEEDED or RESOURCE_EXHAUSTED is
marked down for ``DOWN_S``, doubled after each failure in a row up to ``MAX_DOWN_S``: the
failed work goes to the next replica of its ranking at once, later calls too, until the
mark expires and the owner is tried again (so it gets its shards back once it serves;
a replica down for long, or hung, costs a failed attempt only once a minute). One
attempt per replica: the delay before failing over is one failed attempt, at once for a
refused connection, the call's deadline for a hung replica. Only when every replica is
marked down does the client back off between rounds, with the config's retry policy
(``tidemark.retrying``: ``max_attempts`` rounds, ``max_total_s``) as for one service.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, TypeVar

import grpc
import numpy as np
import structlog

from tidemark import errors
from tidemark.config import ClientConfig
from tidemark.errors import InvalidArgumentError, TidemarkError, UnavailableError
from tidemark.rpc.client import ServiceClient, ServiceName, server_hint_s

log = structlog.get_logger(__name__)

S = TypeVar("S")
T = TypeVar("T")

DOWN_S = 5.0
"""How long a replica that failed a call is passed over before it is tried again."""
MAX_DOWN_S = 60.0
"""The longest it is passed over, after failing each retry in a row."""
FAILS_OVER = (UnavailableError, errors.ResourceExhaustedError)
"""Errors of one replica (unreachable, hung, overloaded) that another replica may not
have; every other error is the answer (a bad request fails the same everywhere)."""


class EveryReplicaDownError(Exception):
    """A round of ``Replicas.spread`` left every replica marked down: the policy backs off
    before the next round. ``last`` is the last replica's error."""

    def __init__(self, last: TidemarkError) -> None:
        super().__init__(last.message)
        self.last = last


def _hint_s(error: BaseException) -> float:
    """The retry hint of the last replica's RESOURCE_EXHAUSTED (0 for any other error)."""
    return server_hint_s(error.last.__cause__) if isinstance(error, EveryReplicaDownError) else 0.0


def replica_addresses(address: str, *, field: str) -> tuple[str, ...]:
    """The replicas a comma-separated ``address`` lists (one address: one replica);
    InvalidArgumentError naming ``field`` for an empty or repeated entry."""
    addresses = tuple(part.strip() for part in address.split(","))
    if not all(addresses):
        raise InvalidArgumentError(f"{address!r} has an empty replica address", field=field)
    repeated = {part for part in addresses if addresses.count(part) > 1}
    if repeated:
        raise InvalidArgumentError(f"{address!r} lists {min(repeated)} twice", field=field)
    return addresses


def ranking(table: str, shard: int, addresses: Sequence[str]) -> tuple[int, ...]:
    """The replicas (positions in ``addresses``) in the order ``shard`` of ``table``
    prefers them: highest rendezvous hash first."""
    scores = [
        int.from_bytes(
            hashlib.blake2b(f"{table}\n{shard}\n{address}".encode(), digest_size=8).digest()
        )
        for address in addresses
    ]
    return tuple(sorted(range(len(addresses)), key=lambda replica: -scores[replica]))


class Replicas(Generic[S]):
    """One service's replicas for one table: a client per replica (one attempt per call)
    and which replicas are down. Picklable: the down marks stay in the process."""

    def __init__(
        self,
        service: ServiceName,
        addresses: Sequence[str],
        table: str,
        stub_class: Callable[[grpc.Channel], S],
        config: ClientConfig | None = None,
    ) -> None:
        self.service = service
        self.addresses = tuple(addresses)
        self.table = table
        self.config = config or ClientConfig.from_env()
        once = dataclasses.replace(self.config, max_attempts=1)
        self.clients = [ServiceClient(service, a, stub_class, once) for a in self.addresses]
        self._rankings: dict[int, tuple[int, ...]] = {}
        self._lock = threading.Lock()
        self._down_until = [0.0] * len(self.addresses)
        self._failures = [0] * len(self.addresses)
        """Failed attempts in a row, per replica."""

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_lock"]
        state["_down_until"] = [0.0] * len(self.addresses)
        state["_failures"] = [0] * len(self.addresses)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def first(self, shard: int, work: Callable[[ServiceClient[S]], T]) -> T:
        """``work`` on the first replica of ``shard``'s ranking that answers it."""
        ((_, result),) = self.spread(np.array([shard]), lambda client, _: work(client))
        return result

    def spread(
        self, shards: np.ndarray, work: Callable[[ServiceClient[S], np.ndarray], T]
    ) -> list[tuple[np.ndarray, T]]:
        """Rows (shard of each in ``shards``) grouped by the replica that serves their
        shard now, ``work(client, rows)`` for each group at once; a group that fails over
        is grouped again over the replicas left. Returns each group's rows and result.
        Once every replica is down, the config's retry policy backs off between rounds,
        each round starting from the next replica of the rankings."""
        pending = np.arange(len(shards))
        answered: list[tuple[np.ndarray, T]] = []
        began = time.monotonic()

        def serve(rotation: int) -> None:
            """Serve ``pending``, failing over at once while a replica is up."""
            nonlocal pending
            while True:
                every_down = self._all_down()
                targets = self._targets(shards[pending], rotation=rotation if every_down else None)
                groups = {
                    int(replica): pending[targets == replica] for replica in np.unique(targets)
                }
                failed: list[np.ndarray] = []
                last: TidemarkError | None = None
                for replica, outcome in self._run(groups, work).items():
                    if isinstance(outcome, TidemarkError):
                        self._mark_down(replica, outcome)
                        failed.append(groups[replica])
                        last = outcome
                    else:
                        self._mark_up(replica)
                        answered.append((groups[replica], outcome))
                if last is None:
                    return
                pending = np.sort(np.concatenate(failed))
                if time.monotonic() - began > self.config.max_total_s:
                    raise self._unreachable(last)
                if self._all_down():
                    raise EveryReplicaDownError(last)

        retrying = self.config.retry_policy.retrying(
            lambda error: isinstance(error, EveryReplicaDownError), hint_s=_hint_s
        )
        try:
            for attempt in retrying:
                with attempt:
                    serve(rotation=attempt.retry_state.attempt_number - 1)
        except EveryReplicaDownError as down:
            raise self._unreachable(down.last) from None
        return answered

    def _run(
        self, groups: dict[int, np.ndarray], work: Callable[[ServiceClient[S], np.ndarray], T]
    ) -> dict[int, T | TidemarkError]:
        """Each group's result, or the error that sends it to another replica; groups on
        several replicas run in parallel threads."""

        def attempt(replica: int) -> T | TidemarkError:
            try:
                return work(self.clients[replica], groups[replica])
            except FAILS_OVER as error:
                return error

        if len(groups) == 1:
            return {replica: attempt(replica) for replica in groups}
        with ThreadPoolExecutor(max_workers=len(groups)) as pool:
            futures = {replica: pool.submit(attempt, replica) for replica in groups}
            return {replica: future.result() for replica, future in futures.items()}

    def _ranking(self, shard: int) -> tuple[int, ...]:
        order = self._rankings.get(shard)
        if order is None:
            order = self._rankings[shard] = ranking(self.table, shard, self.addresses)
        return order

    def _targets(self, shards: np.ndarray, *, rotation: int | None) -> np.ndarray:
        """The replica serving each of ``shards``: the first of its ranking not marked
        down (``rotation`` None), else the ranking's ``rotation``-th (every replica is
        down: each round tries the next)."""
        unique, inverse = np.unique(shards, return_inverse=True)
        rankings = np.array([self._ranking(int(shard)) for shard in unique], np.int64)
        rows = np.arange(len(unique))
        if rotation is None:
            up = ~self._down_mask()[rankings]
            column = np.where(up.any(axis=1), up.argmax(axis=1), 0)
        else:
            column = np.full(len(unique), rotation % len(self.addresses))
        return rankings[rows, column][inverse]

    def _down_mask(self) -> np.ndarray:
        now = time.monotonic()
        with self._lock:
            return np.array([until > now for until in self._down_until])

    def _all_down(self) -> bool:
        return bool(self._down_mask().all())

    def _mark_down(self, replica: int, error: TidemarkError) -> None:
        with self._lock:
            was_up = self._failures[replica] == 0
            self._failures[replica] += 1
            down_s = min(MAX_DOWN_S, DOWN_S * 2 ** (self._failures[replica] - 1))
            self._down_until[replica] = time.monotonic() + down_s
        if was_up:
            log.warning(
                "index.replica_down",
                replica=self.addresses[replica],
                error=error.message,
                note=f"its shards go to the next replica; tried again in {down_s:g} s",
            )

    def _mark_up(self, replica: int) -> None:
        with self._lock:
            was_down = self._failures[replica] > 0
            self._down_until[replica] = 0.0
            self._failures[replica] = 0
        if was_down:
            log.info("index.replica_up", replica=self.addresses[replica])

    def _unreachable(self, error: TidemarkError) -> TidemarkError:
        """The last replica's error once every replica failed: unavailability names
        every replica."""
        if not isinstance(error, UnavailableError):
            return error
        return UnavailableError(
            f"no replica of the {self.service.label} ({', '.join(self.addresses)}) answered; "
            f"the last: {error.message}",
            field=self.service.address_field,
        )
