"""Client side of the marker service: a MarkerWriter for executors, a MarkerReader for
the driver's reconcile and rollback.

The channel is opened lazily in the process that uses it (after PySpark's fork) and only
the address travels when a writer is pickled. Creates are idempotent (a marker names
one data file), so task retries, speculative attempts and RPC retries are all safe; an
unreachable service fails the task once the retries are exhausted, unless the spec asks
to fall back to direct markers. Table paths travel absolute and normalised: the service
runs in another process, maybe on another machine, and refuses relative paths.

Several replicas: one replica owns each marker dir (its lease). A create or delete sent
to another one (``dns:///`` round robin, or any replica's address) is answered with the
owner's address, which the client follows (``OwnerRouting``), so callers never see it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import grpc
import structlog

from tidemark.config import ClientConfig
from tidemark.errors import InvalidArgumentError, NotOwnerError, UnavailableError
from tidemark.proto.common.v1.common_pb2 import TableRef
from tidemark.proto.marker.v1 import marker_service_pb2 as pb
from tidemark.proto.marker.v1.marker_service_pb2_grpc import MarkerServiceStub
from tidemark.retrying import waiting_for_holder
from tidemark.rpc.client import ServiceClient, ServiceName, sent_by_server
from tidemark.rpc.options import balanced
from tidemark.rpc.status import OWNER_KEY
from tidemark.storage import open_storage
from tidemark.storage.uri import canonical_uri
from tidemark.table.leases.storage_lease import LockHolder
from tidemark.table.writes.markers import (
    DirectMarkerWriter,
    IOType,
    MarkerSpec,
    MarkerTuple,
    MarkerWriter,
)

log = structlog.get_logger(__name__)

IO_TYPES: dict[IOType, pb.IOType] = {
    IOType.CREATE: pb.IO_TYPE_CREATE,
    IOType.MERGE: pb.IO_TYPE_MERGE,
    IOType.APPEND: pb.IO_TYPE_APPEND,
}

R = TypeVar("R")

OWNER_WAIT_S = 90.0
"""How long a create or delete waits for an unreachable owner's lease of the marker dir to
run out (then another replica takes the dir over). A replica or writer that crashed
leaves its dirs leased for up to one lease (60 s by default), while a crashed writer's
table lock may expire sooner, so the next writer's rollback would otherwise fail."""
OWNER_POLL_S = 1.0
MAX_OWNER_HOPS = 3
"""Redirects one attempt follows: to the owner named, and on if the dir changed hands."""
MARKER_SERVICE = ServiceName(
    full_name=pb.DESCRIPTOR.services_by_name["MarkerService"].full_name,
    label="marker service",
    address_field="marker_service_address",
)


def check_reachable(address: str, config: ClientConfig | None = None) -> None:
    """Ask the service's health endpoint, before a write creates anything; an unreachable
    or not serving service is an UnavailableError naming it."""
    ServiceClient(MARKER_SERVICE, address, MarkerServiceStub, config).check_reachable()


_owners: dict[tuple[str, str, str], str] = {}
"""Owner address found per (service address, table, instant), in this process."""
_owners_lock = threading.Lock()


MARKERS_PER_CALL = 10_000
"""Markers in one CreateMarkers call: about half the service's 4 MiB limit for the method
with Hudi's longest marker names."""


class OwnerRouting:
    """Calls that need the replica owning a marker dir (creates, deletes).

    A call goes to the owner last found for its dir, else to the service address. A
    replica that does not own the dir answers NotOwnerError naming the owner; the call
    follows it (at most ``MAX_OWNER_HOPS`` times) and remembers it. The owner also names
    itself on every answer (trailing metadata), so a call through a Service that
    balances over the replicas (``dns:///``) that lands on the owner remembers it too:
    after its first answer, a writer calls the owner directly. An owner that cannot
    be reached is forgotten: the one remembered, by asking the service address again at
    once; the one a replica named (crashed, its lease still running), by reporting that
    NotOwnerError, which the call waits out for up to ``owner_wait_s``, asking the
    service address again every ``OWNER_POLL_S`` (jittered down to half, as every wait
    for a holder in ``tidemark.retrying``): once the lease ran out, the replica asked
    takes the dir over.
    """

    def __init__(
        self, address: str, table_uri: str, config: ClientConfig | None, owner_wait_s: float
    ) -> None:
        self.config = config
        self.owner_wait_s = owner_wait_s
        self.client = self._client_for(address)
        self.table = TableRef(base_path=canonical_uri(table_uri))
        self._clients: dict[str, ServiceClient[MarkerServiceStub]] = {address: self.client}

    def _client_for(self, address: str) -> ServiceClient[MarkerServiceStub]:
        return ServiceClient(MARKER_SERVICE, address, MarkerServiceStub, self.config)

    def call(
        self,
        method: Callable[[MarkerServiceStub], Callable[..., R]],
        request: Any,
        instant: str,
    ) -> R:
        """``method(stub)(request)`` on the dir's owner, waiting out an unreachable one."""
        waiting = waiting_for_holder(self.owner_wait_s, first_s=OWNER_POLL_S, max_s=OWNER_POLL_S)
        return waiting(self._follow, method, request, instant)

    def _follow(
        self,
        method: Callable[[MarkerServiceStub], Callable[..., R]],
        request: Any,
        instant: str,
    ) -> R:
        key = (self.client.address, self.table.base_path, instant)
        with _owners_lock:
            address = _owners.get(key, self.client.address)
        redirect: NotOwnerError | None = None
        for _ in range(MAX_OWNER_HOPS + 1):
            client = self._clients.get(address)
            if client is None:
                client = self._clients[address] = self._client_for(address)
            try:
                answer, call = client.call(_with_call(method(client.stub)), request)
            except NotOwnerError as error:
                if not error.owner or error.owner == address:
                    raise  # the owner is unknown, or an earlier process at this address
                log.debug("marker dir owner named", owner=error.owner, instant=instant)
                redirect, address = error, error.owner
                continue
            except UnavailableError as error:
                self._forget(key)
                if address == self.client.address or sent_by_server(error.__cause__):
                    raise
                log.info("marker dir owner unreachable", owner=address, instant=instant)
                if redirect is not None:
                    raise redirect from error
                address = self.client.address  # the owner remembered is gone: ask again
                continue
            except BaseException:
                self._forget(key)
                raise
            if address == self.client.address and balanced(address):
                address = named_owner(call) or address
            if address != self.client.address:
                with _owners_lock:
                    _owners[key] = address
            return answer
        raise redirect or NotOwnerError(
            f"the marker dir of {instant} changed owners too often", field="instant_time"
        )

    @staticmethod
    def _forget(key: tuple[str, str, str]) -> None:
        with _owners_lock:
            _owners.pop(key, None)


class ServiceMarkerWriter:
    """MarkerWriter that asks the marker service; answers after the marker is durable."""

    def __init__(
        self,
        spec: MarkerSpec,
        config: ClientConfig | None = None,
        *,
        owner_wait_s: float = OWNER_WAIT_S,
    ) -> None:
        if spec.service_address is None:
            raise InvalidArgumentError("service markers need an address", field="service_address")
        self.spec = spec
        self._routing = OwnerRouting(spec.service_address, spec.table_uri, config, owner_wait_s)
        self._table = self._routing.table

    def create(self, partition_path: str, data_file_name: str, io_type: IOType) -> bool:
        """True if this call created the marker, False if it already existed."""
        request = pb.CreateMarkerRequest(
            table=self._table,
            instant_time=self.spec.instant,
            marker=_marker(partition_path, data_file_name, io_type),
        )
        marker = (partition_path, data_file_name, io_type)
        try:
            response = self._routing.call(_create_marker, request, self.spec.instant)
        except UnavailableError as error:
            return self._direct([marker], error)[0]
        return bool(response.created)

    def create_many(self, markers: Sequence[MarkerTuple]) -> list[bool]:
        """Create several markers, in calls of at most ``MARKERS_PER_CALL`` (one flush
        each); one answer per marker."""
        created: list[bool] = []
        for start in range(0, len(markers), MARKERS_PER_CALL):
            created += self._create_call(markers[start : start + MARKERS_PER_CALL])
        return created

    def _create_call(self, markers: Sequence[MarkerTuple]) -> list[bool]:
        request = pb.CreateMarkersRequest(
            table=self._table,
            instant_time=self.spec.instant,
            markers=[_marker(*marker) for marker in markers],
        )
        try:
            response = self._routing.call(_create_markers, request, self.spec.instant)
        except UnavailableError as error:
            return self._direct(markers, error)
        return list(response.created)

    def _direct(self, markers: Sequence[MarkerTuple], error: UnavailableError) -> list[bool]:
        """Direct markers when the spec allows falling back, else the service's error."""
        if not self.spec.fallback_to_direct:
            raise error
        log.warning("marker service unavailable, writing direct markers", error=str(error))
        direct = DirectMarkerWriter(open_storage(self.spec.table_uri), self.spec.instant)
        return [direct.create(*marker) for marker in markers]


class ServiceMarkerReader:
    """MarkerReader that asks the marker service (which owns the dirs it writes).

    A reader built with the table lock's ``lock_holder`` (a writer's reconcile and
    rollback) deletes marker dirs at once, even one leased by another live service."""

    def __init__(
        self,
        address: str,
        table_uri: str,
        config: ClientConfig | None = None,
        *,
        owner_wait_s: float = OWNER_WAIT_S,
        lock_holder: LockHolder | None = None,
    ) -> None:
        self.lock_holder = lock_holder
        self._routing = OwnerRouting(address, table_uri, config, owner_wait_s)
        self._client = self._routing.client
        self._table = self._routing.table

    def all_markers(self, instant: str) -> set[str]:
        return self._list(instant, pb.MARKER_FILTER_ALL)

    def create_and_merge_markers(self, instant: str) -> set[str]:
        return self._list(instant, pb.MARKER_FILTER_CREATE_AND_MERGE)

    def append_markers(self, instant: str) -> set[str]:
        return self._list(instant, pb.MARKER_FILTER_APPEND)

    def dir_exists(self, instant: str) -> bool:
        request = pb.MarkerDirExistsRequest(table=self._table, instant_time=instant)
        response = self._client.call(self._client.stub.MarkerDirExists, request)
        return bool(response.exists)

    def delete_dir(self, instant: str) -> bool:
        """Delete for the table lock holder (any replica, at once), or else through the
        dir's owner: while an unreachable process holds its lease, wait up to
        ``owner_wait_s`` for it to end."""
        request = pb.DeleteMarkerDirRequest(table=self._table, instant_time=instant)
        if self.lock_holder is None:
            return bool(self._routing.call(_delete_marker_dir, request, instant).deleted)
        request.table_lock.generation = self.lock_holder.generation
        request.table_lock.token = self.lock_holder.token
        return bool(self._client.call(self._client.stub.DeleteMarkerDir, request).deleted)

    def _list(self, instant: str, marker_filter: pb.MarkerFilter) -> set[str]:
        stub = self._client.stub

        def read_all(
            request: pb.ListMarkersRequest, *, timeout: float, metadata: tuple[tuple[str, str], ...]
        ) -> set[str]:
            names: set[str] = set()
            for chunk in stub.ListMarkers(request, timeout=timeout, metadata=metadata):
                names.update(chunk.marker_names)
            return names

        request = pb.ListMarkersRequest(
            table=self._table, instant_time=instant, filter=marker_filter
        )
        return self._client.call(read_all, request)


def _with_call(method: Callable[..., R]) -> Callable[..., tuple[R, grpc.Call]]:
    """The stub method's variant answering (response, call), for the call's metadata."""
    unary = cast(grpc.UnaryUnaryMultiCallable, method)
    return cast(Callable[..., tuple[R, grpc.Call]], unary.with_call)


def named_owner(call: grpc.Call) -> str | None:
    """The owner an answer named in its trailing metadata, if any."""
    for key, value in call.trailing_metadata() or ():
        if key == OWNER_KEY and isinstance(value, str) and value:
            return value
    return None


def _create_marker(stub: MarkerServiceStub) -> Callable[..., pb.CreateMarkerResponse]:
    return stub.CreateMarker


def _create_markers(stub: MarkerServiceStub) -> Callable[..., pb.CreateMarkersResponse]:
    return stub.CreateMarkers


def _delete_marker_dir(stub: MarkerServiceStub) -> Callable[..., pb.DeleteMarkerDirResponse]:
    return stub.DeleteMarkerDir


def _marker(partition_path: str, data_file_name: str, io_type: IOType) -> pb.Marker:
    return pb.Marker(
        partition_path=partition_path, data_file_name=data_file_name, io_type=IO_TYPES[io_type]
    )


def marker_writer_for(spec: MarkerSpec) -> MarkerWriter:
    """Build the writer inside the executor process (the service client opens its channel
    lazily there)."""
    if spec.kind == "direct":
        return DirectMarkerWriter(open_storage(spec.table_uri), spec.instant)
    return ServiceMarkerWriter(spec, spec.client)
