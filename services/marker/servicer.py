"""gRPC servicer of tidemark.marker.v1.MarkerService over the batching engine.

Handlers validate, call the engine and stay free of error handling: the runtime's
interceptor maps ``tidemark.errors`` to status codes. A create handler blocks its
worker thread until the batch holding its markers is flushed, so the server needs at
least as many worker threads as concurrent writers (``TIDEMARK_MAX_WORKERS``).
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import structlog

from services.marker import requests
from services.marker.engine import MarkerEngine
from tidemark.config import ServerConfig
from tidemark.marker.v1 import marker_service_pb2 as pb
from tidemark.marker.v1 import marker_service_pb2_grpc as pb_grpc
from tidemark.table.markers import IOType, parse_marker_name

log = structlog.get_logger(__name__)

LIST_CHUNK = 10_000
"""Marker names per ListMarkers message (about 1 MB)."""


class MarkerServicer(pb_grpc.MarkerServiceServicer):
    def __init__(self, engine: MarkerEngine, config: ServerConfig) -> None:
        self.engine = engine
        self.config = config

    def CreateMarker(  # noqa: N802 (gRPC method name)
        self, request: pb.CreateMarkerRequest, context: grpc.ServicerContext
    ) -> pb.CreateMarkerResponse:
        table = requests.table_uri(request.table.base_path, self.config)
        instant = requests.instant_time(request.instant_time)
        name = requests.marker(request.marker)
        (created,) = self.engine.create(table, instant, [name]).result()
        return pb.CreateMarkerResponse(created=created)

    def CreateMarkers(  # noqa: N802 (gRPC method name)
        self, request: pb.CreateMarkersRequest, context: grpc.ServicerContext
    ) -> pb.CreateMarkersResponse:
        table = requests.table_uri(request.table.base_path, self.config)
        instant = requests.instant_time(request.instant_time)
        names = requests.markers(list(request.markers), self.engine.config.queue_limit)
        if not names:
            return pb.CreateMarkersResponse()
        return pb.CreateMarkersResponse(created=self.engine.create(table, instant, names).result())

    def ListMarkers(  # noqa: N802 (gRPC method name)
        self, request: pb.ListMarkersRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.ListMarkersResponse]:
        table = requests.table_uri(request.table.base_path, self.config)
        instant = requests.instant_time(request.instant_time)
        names = sorted(
            name for name in self.engine.list_markers(table, instant) if _keep(name, request.filter)
        )
        for start in range(0, len(names), LIST_CHUNK):
            yield pb.ListMarkersResponse(marker_names=names[start : start + LIST_CHUNK])

    def MarkerDirExists(  # noqa: N802 (gRPC method name)
        self, request: pb.MarkerDirExistsRequest, context: grpc.ServicerContext
    ) -> pb.MarkerDirExistsResponse:
        table = requests.table_uri(request.table.base_path, self.config)
        instant = requests.instant_time(request.instant_time)
        return pb.MarkerDirExistsResponse(exists=self.engine.dir_exists(table, instant))

    def DeleteMarkerDir(  # noqa: N802 (gRPC method name)
        self, request: pb.DeleteMarkerDirRequest, context: grpc.ServicerContext
    ) -> pb.DeleteMarkerDirResponse:
        table = requests.table_uri(request.table.base_path, self.config)
        instant = requests.instant_time(request.instant_time)
        return pb.DeleteMarkerDirResponse(deleted=self.engine.delete_dir(table, instant))


def _keep(name: str, marker_filter: int) -> bool:
    if marker_filter in (pb.MARKER_FILTER_UNSPECIFIED, pb.MARKER_FILTER_ALL):
        return True
    is_append = parse_marker_name(name)[2] is IOType.APPEND
    return is_append if marker_filter == pb.MARKER_FILTER_APPEND else not is_append
