"""gRPC servicer of tidemark.marker.v1.MarkerService over the batching engine.

Handlers validate, call the engine and stay free of error handling: the runtime's
interceptor maps ``tidemark.errors`` to status codes. They run on the server's event
loop: a create awaits the flush of the batch holding its markers (a coroutine per
waiting writer, no thread), storage work runs in threads so the loop never blocks.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import structlog

from tidemark.config import ServerConfig
from tidemark.proto.marker.v1 import marker_service_pb2 as pb
from tidemark.proto.marker.v1 import marker_service_pb2_grpc as pb_grpc
from tidemark.rpc.auth import Role
from tidemark.rpc.requests import TableResolver
from tidemark.rpc.status import OWNER_KEY
from tidemark.services.marker import requests
from tidemark.services.marker.engine import MarkerEngine
from tidemark.table.writes.markers import IOType, parse_marker_name

log = structlog.get_logger(__name__)

Context = grpc.aio.ServicerContext[Any, Any]
DirRequest = (
    pb.CreateMarkerRequest
    | pb.CreateMarkersRequest
    | pb.ListMarkersRequest
    | pb.MarkerDirExistsRequest
    | pb.DeleteMarkerDirRequest
)
LIST_CHUNK = 10_000
"""Marker names per ListMarkers message (about 1 MB)."""


class MarkerServicer(pb_grpc.MarkerServiceServicer):
    def __init__(self, engine: MarkerEngine, config: ServerConfig) -> None:
        self.engine = engine
        self.config = config
        self._table_uri = TableResolver(config)
        """Every create names its table, and resolving a table is a storage call."""

    async def CreateMarker(  # noqa: N802 (gRPC method name)
        self, request: pb.CreateMarkerRequest, context: Context
    ) -> pb.CreateMarkerResponse:
        table, instant = self._marker_dir(request)
        name = requests.marker(request.marker)
        (created,) = await self._create(table, instant, [name])
        self._name_owner(context)
        return pb.CreateMarkerResponse(created=created)

    async def CreateMarkers(  # noqa: N802 (gRPC method name)
        self, request: pb.CreateMarkersRequest, context: Context
    ) -> pb.CreateMarkersResponse:
        table, instant = self._marker_dir(request)
        names = requests.markers(list(request.markers), self.engine.config.queue_limit)
        if not names:
            return pb.CreateMarkersResponse()
        created = await self._create(table, instant, names)
        self._name_owner(context)
        return pb.CreateMarkersResponse(created=created)

    async def ListMarkers(  # noqa: N802 (gRPC method name)
        self, request: pb.ListMarkersRequest, context: Context
    ) -> AsyncIterator[pb.ListMarkersResponse]:
        table, instant = self._marker_dir(request)
        markers = await asyncio.to_thread(self.engine.list_markers, table, instant)
        names = sorted(name for name in markers if _keep(name, request.filter))
        for start in range(0, len(names), LIST_CHUNK):
            yield pb.ListMarkersResponse(marker_names=names[start : start + LIST_CHUNK])

    async def MarkerDirExists(  # noqa: N802 (gRPC method name)
        self, request: pb.MarkerDirExistsRequest, context: Context
    ) -> pb.MarkerDirExistsResponse:
        table, instant = self._marker_dir(request)
        exists = await asyncio.to_thread(self.engine.dir_exists, table, instant)
        return pb.MarkerDirExistsResponse(exists=exists)

    async def DeleteMarkerDir(  # noqa: N802 (gRPC method name)
        self, request: pb.DeleteMarkerDirRequest, context: Context
    ) -> pb.DeleteMarkerDirResponse:
        holder = requests.lock_holder(request)
        table, instant = self._marker_dir(request, None if holder else Role.ADMIN)
        deleted = await asyncio.to_thread(self.engine.delete_dir, table, instant, holder)
        return pb.DeleteMarkerDirResponse(deleted=deleted)

    def _name_owner(self, context: Context) -> None:
        """Tell the client this replica owns the dir: one reached through the Service (a
        ``dns:///`` target) then calls it directly, and never lands on a non-owner again."""
        if self.engine.address:
            context.set_trailing_metadata(((OWNER_KEY, self.engine.address),))

    def _marker_dir(self, request: DirRequest, role: Role | None = None) -> tuple[str, str]:
        """The (canonical table URI, instant) a request names, validated; ``role``
        raises the one the method needs."""
        return self._table_uri(request.table.base_path, role=role), requests.instant_time(
            request.instant_time
        )

    async def _create(self, table: str, instant: str, names: list[str]) -> list[bool]:
        """Queue without leaving the loop and await the flush; on a dir's first use,
        open it in a thread first (lease, loading MARKERS files from storage)."""
        while (flushed := self.engine.create(table, instant, names)) is None:
            await asyncio.to_thread(self.engine.open_dir, table, instant)
        return await flushed


def _keep(name: str, marker_filter: int) -> bool:
    if marker_filter in (pb.MARKER_FILTER_UNSPECIFIED, pb.MARKER_FILTER_ALL):
        return True
    is_append = parse_marker_name(name)[2] is IOType.APPEND
    return is_append if marker_filter == pb.MARKER_FILTER_APPEND else not is_append
