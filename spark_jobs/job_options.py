"""Options of the Spark jobs that write files (``write``, ``cluster run``): where markers
and the record index are served, the Spark master and the table lock's wait and lease, so
the jobs spell them the same way, with one default each (``JobOptions``, the fields
``WriteOptions`` and ``ClusterOptions`` share), how their markers are made and read back
(``MarkerOptions``) and how they hold the table lock (``Locking``)."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal, Self

from tidemark.checks import require_positive
from tidemark.clients.index import IndexClient
from tidemark.clients.marker import ServiceMarkerReader, check_reachable
from tidemark.config import add_client_arguments
from tidemark.errors import InvalidArgumentError
from tidemark.jobs.checks import require_one_of
from tidemark.rpc.client import config_for
from tidemark.rpc.embedded import start_embedded_service
from tidemark.table import HoodieTable
from tidemark.table.leases.storage_lease import (
    DEFAULT_LOCK_LEASE_S,
    DEFAULT_LOCK_WAIT_S,
    LockHolder,
    StorageLease,
    check_lock_wait,
)
from tidemark.table.leases.table_lock import changing
from tidemark.table.writes.markers import MarkerReader, MarkerSpec, StorageMarkerReader

__all__ = [
    "DEFAULT_LOCK_LEASE_S",
    "DEFAULT_LOCK_WAIT_S",
    "JobOptions",
    "Locking",
    "MarkerKind",
    "MarkerOptions",
]

MarkerKind = Literal["direct", "service"]

DEFAULT_MASTER = "local[*]"
"""Spark master of the CLI's jobs; spark-submit keeps its own (``--master`` unset)."""


@dataclass(frozen=True)
class MarkerOptions:
    """How a job's tasks create markers (direct objects, or batched by the marker service
    at ``service_address``) and how its driver reads them back."""

    kind: MarkerKind
    service_address: str | None
    fallback_direct: bool

    def __post_init__(self) -> None:
        if self.kind == "service" and not self.service_address:
            raise InvalidArgumentError(
                "service markers need a marker service address (or use direct markers)",
                field="marker_service_address",
            )

    def check_reachable(self) -> None:
        """A job that may not fall back to direct markers fails before any work when its
        marker service cannot be reached."""
        if self.kind == "service" and self.service_address and not self.fallback_direct:
            check_reachable(self.service_address)

    def spec(self, table_uri: str, instant: str) -> MarkerSpec:
        """What the job's tasks need to create the markers of ``instant``."""
        address = self.service_address
        client = config_for(address) if self.kind == "service" and address else None
        return MarkerSpec(
            self.kind, table_uri, instant, self.service_address, self.fallback_direct, client
        )

    def reader(self, table: HoodieTable, lock_holder: LockHolder | None) -> MarkerReader:
        """Reconcile and rollback ask the marker service when the job uses it (it owns the
        marker dirs it batches); otherwise they read direct and MARKERS* files from
        storage."""
        if self.kind == "service" and self.service_address:
            return ServiceMarkerReader(self.service_address, table.uri, lock_holder=lock_holder)
        return StorageMarkerReader(table.storage)


@dataclass(frozen=True)
class Locking:
    """How a job holds the table lock for its short steps and keeps its own lease (a
    write's, a clustering run's) meanwhile: the wait for a holder, the lease, and what to
    do when a lease is lost (``cancel`` the job's Spark jobs)."""

    wait_s: float
    lease_s: float
    cancel: Callable[[], None]

    @contextmanager
    def changing(
        self,
        table: HoodieTable,
        role: str,
        wait_s: float | None = None,
        *,
        merge_on_read: bool = False,
    ) -> Iterator[StorageLease]:
        """The table lock for one short step (``wait_s``: this step's wait, when less;
        ``merge_on_read``: the step handles merge-on-read tables)."""
        with changing(
            table,
            role,
            wait_s=self.wait_s if wait_s is None else wait_s,
            lease_s=self.lease_s,
            on_lost=self.cancel,
            merge_on_read=merge_on_read,
        ) as lock:
            yield lock


@dataclass(frozen=True)
class JobOptions:
    """The options every job that writes files takes (``add_job_options``' flags), with
    the CLI's defaults; ``WriteOptions`` and ``ClusterOptions`` extend it."""

    markers: MarkerKind = "service"
    """``service``: markers batched by the marker service (Hudi's timeline-server markers);
    ``direct``: one marker object per data file."""
    marker_service_address: str | None = None
    """``host:port`` of a ``tidemark serve marker``; None with service markers starts an
    embedded marker service in the driver, like Hudi's embedded timeline server."""
    marker_fallback_direct: bool = False
    """Write direct markers when the marker service stays unreachable after retries."""
    index_service_address: str | None = None
    """``host:port`` of a ``tidemark serve index`` for a table with a record index; None
    starts an embedded one in the driver."""
    lock_lease_s: float = DEFAULT_LOCK_LEASE_S
    """Lease of the table lock and of the job's own run; a job that cannot renew it for
    half of it stops."""
    lock_wait_s: float = DEFAULT_LOCK_WAIT_S
    """How long to wait for a table lock another writer holds (0: fail at once)."""

    def __post_init__(self) -> None:
        require_one_of("markers", self.markers, ("direct", "service"), "marker kind")
        require_positive("lock_lease_s", self.lock_lease_s)
        check_lock_wait(self.lock_wait_s)

    @staticmethod
    def job_fields(args: argparse.Namespace) -> dict[str, Any]:
        """The fields ``add_job_options`` parsed, for a subclass's ``from_args``."""
        return {
            "markers": args.markers,
            "marker_service_address": args.marker_service,
            "marker_fallback_direct": args.marker_fallback_direct,
            "index_service_address": args.index_service,
            "lock_lease_s": args.lock_lease_s,
            "lock_wait_s": args.lock_wait_s,
        }

    def marker_options(self) -> MarkerOptions:
        """How the job's tasks make markers (service markers need an address by now)."""
        return MarkerOptions(self.markers, self.marker_service_address, self.marker_fallback_direct)

    def with_marker_service(self, address: str | None) -> Self:
        return dataclasses.replace(self, marker_service_address=address)

    def locking(self, cancel: Callable[[], None]) -> Locking:
        """The job's ``Locking``, cancelling its Spark jobs through ``cancel``."""
        return Locking(self.lock_wait_s, self.lock_lease_s, cancel)


@contextmanager
def serving_markers(kind: MarkerKind, address: str | None) -> Iterator[str | None]:
    """The marker service a job's tasks use: ``address``, or for service markers without
    one an embedded service in the driver, like Hudi's embedded timeline server."""
    if kind == "service" and not address:
        with start_embedded_service("marker") as service:
            yield service.address
    else:
        yield address


@contextmanager
def serving_index(
    table_uri: str, indexed: bool, address: str | None
) -> Iterator[IndexClient | None]:
    """A client of the index service for a table with a record index (an embedded service
    in the driver when no address is given), None for a table without one."""
    if not indexed:
        yield None
    elif address:
        yield IndexClient(address, table_uri)
    else:
        with start_embedded_service("index") as service:
            yield IndexClient(service.address, table_uri)


def add_job_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--markers",
        choices=("direct", "service"),
        default="service",
        help="marker type (default service: batched by the marker service)",
    )
    parser.add_argument(
        "--marker-fallback-direct",
        action="store_true",
        help="write direct markers when the marker service stays unreachable after retries",
    )
    parser.add_argument(
        "--marker-service",
        help="marker service address host:port or dns:///name:port (default: start an "
        "embedded one in the driver)",
    )
    parser.add_argument(
        "--index-service",
        metavar="HOST:PORT[,HOST:PORT...]",
        help="index service address, for a table with a record index: one address, or the "
        "replicas' addresses comma-separated (each shard routed to one, failing over to the "
        "next when it is down); default: start an embedded one in the driver",
    )
    add_client_arguments(parser)
    parser.add_argument("--master", default=DEFAULT_MASTER, help="Spark master")
    add_lock_options(parser)


def add_lock_options(parser: argparse.ArgumentParser) -> None:
    """``--lock-wait-s`` and ``--lock-lease-s``, of the jobs that hold a lease (the table
    lock, a clustering plan's run, an index build) while Spark works."""
    add_lock_wait_option(parser)
    parser.add_argument(
        "--lock-lease-s",
        type=float,
        default=DEFAULT_LOCK_LEASE_S,
        help="lease in seconds of the table lock and of the job's own run (renewed 6 times "
        "per lease; a job that cannot renew for half of it stops and commits nothing)",
    )


def add_lock_wait_option(parser: argparse.ArgumentParser) -> None:
    """``--lock-wait-s``, of every command that takes the table lock."""
    parser.add_argument(
        "--lock-wait-s",
        type=non_negative_float,
        default=DEFAULT_LOCK_WAIT_S,
        help=f"wait up to this many seconds for a table lock another process holds "
        f"(default {DEFAULT_LOCK_WAIT_S:g}; 0 fails at once)",
    )


def non_negative_float(text: str) -> float:
    """An argparse type: a number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value
