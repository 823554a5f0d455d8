"""Marker service: Hudi timeline-server-based markers, batched, over gRPC.

``SERVICE`` is what ``tidemark serve marker`` loads from the runtime's registry.
Settings come from ``TIDEMARK_MARKER_*`` env vars (see ``config.MarkerConfig``).
"""

from __future__ import annotations

import grpc
import structlog

from tidemark.config import MIB
from tidemark.proto.marker.v1 import marker_service_pb2_grpc as pb_grpc
from tidemark.rpc.auth import Role
from tidemark.rpc.limits import MethodPolicy
from tidemark.rpc.registry import Closeable, ServiceContext, ServiceDefinition
from tidemark.services.marker.config import MarkerConfig
from tidemark.services.marker.engine import MarkerEngine
from tidemark.services.marker.metrics import MarkerMetrics
from tidemark.services.marker.servicer import MarkerServicer

log = structlog.get_logger(__name__)

FULL_NAME = "tidemark.marker.v1.MarkerService"

MARKERS_REQUEST_BYTES = 4 * MIB
"""A CreateMarkers call: about 20k markers of Hudi's longest names."""

METHODS = {
    "CreateMarker": MethodPolicy(Role.WRITE),
    "CreateMarkers": MethodPolicy(Role.WRITE, MARKERS_REQUEST_BYTES),
    "ListMarkers": MethodPolicy(Role.READ),
    "MarkerDirExists": MethodPolicy(Role.READ),
    "DeleteMarkerDir": MethodPolicy(Role.WRITE),
}
"""A create is a few hundred bytes. Deleting a marker dir is ``write`` for the table
lock's holder (a writer's commit and rollback), else ``admin`` (see the servicer)."""


def marker_service(
    config: MarkerConfig | None = None, engine: MarkerEngine | None = None
) -> ServiceDefinition:
    """The service definition; without ``config`` settings load from the env when served.
    An embedding caller may pass its own ``engine`` to read its counters."""

    def add_to_server(server: grpc.aio.Server, context: ServiceContext) -> Closeable:
        return _add_to_server(
            server, context, engine or MarkerEngine(config or MarkerConfig.load())
        )

    return ServiceDefinition(
        name="marker", full_name=FULL_NAME, add_to_server=add_to_server, methods=METHODS
    )


def _add_to_server(
    server: grpc.aio.Server, context: ServiceContext, engine: MarkerEngine
) -> Closeable:
    """Register the servicer over a running engine; the engine is closed after the server."""
    config = engine.config
    engine.address = context.advertise_address
    pb_grpc.add_MarkerServiceServicer_to_server(MarkerServicer(engine, context.config), server)
    context.metrics.register(MarkerMetrics(engine))
    log.info(
        "marker service ready",
        owner=engine.owner,
        advertise_address=engine.address,
        batch_interval_ms=config.batch_interval_ms,
        num_marker_files=config.num_marker_files,
        max_concurrent_rpcs=context.config.max_concurrent_rpcs,
    )
    return engine


SERVICE = marker_service()
