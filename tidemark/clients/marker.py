"""Client side of the marker service: a MarkerWriter for executors, a MarkerReader for
the driver's reconcile and rollback.

The channel is opened lazily in the process that uses it (after PySpark's fork) and only
the address travels when a writer is pickled. Creates are idempotent (a marker names
one data file), so task retries, speculative attempts and RPC retries are all safe; an
unreachable service fails the task once the retries are exhausted, unless the spec asks
to fall back to direct markers. Table paths travel absolute and normalised: the service
runs in another process, maybe on another machine, and refuses relative paths.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_fixed

from tidemark.config import ClientConfig
from tidemark.errors import ConflictError, InvalidArgumentError, UnavailableError
from tidemark.proto.common.v1.common_pb2 import TableRef
from tidemark.proto.marker.v1 import marker_service_pb2 as pb
from tidemark.proto.marker.v1.marker_service_pb2_grpc import MarkerServiceStub
from tidemark.rpc.client import ServiceClient, ServiceName
from tidemark.storage import open_storage
from tidemark.storage.uri import canonical_uri
from tidemark.table.lock import LockHolder
from tidemark.table.markers import DirectMarkerWriter, IOType, MarkerSpec, MarkerWriter

log = structlog.get_logger(__name__)

IO_TYPES: dict[IOType, pb.IOType] = {
    IOType.CREATE: pb.IO_TYPE_CREATE,
    IOType.MERGE: pb.IO_TYPE_MERGE,
    IOType.APPEND: pb.IO_TYPE_APPEND,
}

MarkerTuple = tuple[str, str, IOType]
"""(partition path, data file name, IO type)."""

OWNER_WAIT_S = 90.0
"""How long deleting a marker dir waits for another owner's lease of it to run out. A
writer that crashed leaves its dir leased for up to one lease (60 s by default) while its
table lock may expire sooner, so the next writer's rollback would otherwise fail."""
OWNER_POLL_S = 1.0
MARKER_SERVICE = ServiceName(
    full_name=pb.DESCRIPTOR.services_by_name["MarkerService"].full_name,
    label="marker service",
    address_field="marker_service_address",
)


def check_reachable(address: str, config: ClientConfig | None = None) -> None:
    """Ask the service's health endpoint, before a write creates anything; an unreachable
    or not serving service is an UnavailableError naming it."""
    ServiceClient(MARKER_SERVICE, address, MarkerServiceStub, config).check_reachable()


class ServiceMarkerWriter:
    """MarkerWriter that asks the marker service; answers after the marker is durable."""

    def __init__(self, spec: MarkerSpec, config: ClientConfig | None = None) -> None:
        if spec.service_address is None:
            raise InvalidArgumentError("service markers need an address", field="service_address")
        self.spec = spec
        self._client = ServiceClient(
            MARKER_SERVICE, spec.service_address, MarkerServiceStub, config
        )
        self._table = TableRef(base_path=canonical_uri(spec.table_uri))

    def create(self, partition_path: str, data_file_name: str, io_type: IOType) -> bool:
        """True if this call created the marker, False if it already existed."""
        request = pb.CreateMarkerRequest(
            table=self._table,
            instant_time=self.spec.instant,
            marker=_marker(partition_path, data_file_name, io_type),
        )
        marker = (partition_path, data_file_name, io_type)
        try:
            response = self._client.call(self._client.stub.CreateMarker, request)
        except UnavailableError as error:
            return self._direct([marker], error)[0]
        return bool(response.created)

    def create_many(self, markers: Sequence[MarkerTuple]) -> list[bool]:
        """Create several markers in one call (one flush); one answer per marker."""
        request = pb.CreateMarkersRequest(
            table=self._table,
            instant_time=self.spec.instant,
            markers=[_marker(*marker) for marker in markers],
        )
        try:
            response = self._client.call(self._client.stub.CreateMarkers, request)
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
        self.owner_wait_s = owner_wait_s
        self.lock_holder = lock_holder
        self._client = ServiceClient(MARKER_SERVICE, address, MarkerServiceStub, config)
        self._table = TableRef(base_path=canonical_uri(table_uri))

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
        """Delete for the table lock holder, or else as the dir's owner: while another
        process holds its lease (ConflictError), wait up to ``owner_wait_s`` for it to end."""
        request = pb.DeleteMarkerDirRequest(table=self._table, instant_time=instant)
        if self.lock_holder is not None:
            request.table_lock.generation = self.lock_holder.generation
            request.table_lock.token = self.lock_holder.token
        waiting = Retrying(
            retry=retry_if_exception_type(ConflictError),
            wait=wait_fixed(OWNER_POLL_S),
            stop=stop_after_delay(self.owner_wait_s),
            reraise=True,
        )
        response = waiting(self._client.call, self._client.stub.DeleteMarkerDir, request)
        return bool(response.deleted)

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
