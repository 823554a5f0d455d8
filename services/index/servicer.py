"""gRPC servicer of tidemark.proto.index.v1.IndexService over the tables' record indexes.

Handlers stay free of error handling: the runtime's interceptor maps ``tidemark.errors``
to status codes. Each call's work (decoding and validating the batch, reading shards,
encoding the answer) runs in one thread off the event loop; the loop only moves bytes.
Locations go back dictionary-encoded (a batch names few partitions and file groups), so
a 100k-key answer is a few hundred kilobytes plus its dictionaries.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc

from tidemark.checks import require_non_negative
from tidemark.config import ServerConfig
from tidemark.errors import InvalidArgumentError
from tidemark.index.wire import LOCATION_COLUMNS
from tidemark.proto.index.v1 import index_service_pb2 as pb
from tidemark.proto.index.v1 import index_service_pb2_grpc as pb_grpc
from tidemark.rpc import arrow_ipc
from tidemark.rpc.requests import TableResolver
from tidemark.services.index import requests
from tidemark.services.index.metrics import IndexMetrics
from tidemark.services.index.tables import IndexTables

Context = grpc.aio.ServicerContext[Any, Any]


class IndexServicer(pb_grpc.IndexServiceServicer):
    def __init__(self, tables: IndexTables, config: ServerConfig, metrics: IndexMetrics) -> None:
        self.tables = tables
        self.metrics = metrics
        self._table_uri = TableResolver(config)
        self.max_decoded_bytes = config.max_message_bytes
        """A batch may not decode to more than an uncompressed request may carry."""

    async def Lookup(  # noqa: N802 (gRPC method name)
        self, request: pb.LookupRequest, context: Context
    ) -> pb.LookupResponse:
        table = self._table_uri(request.table.base_path)
        locations, found = await asyncio.to_thread(
            self._lookup, table, request.keys, request.as_of_instant
        )
        return pb.LookupResponse(locations=locations, found=found)

    async def StreamLookup(  # noqa: N802 (gRPC method name)
        self, request_iterator: AsyncIterator[pb.StreamLookupRequest], context: Context
    ) -> AsyncIterator[pb.StreamLookupResponse]:
        table: str | None = None
        async for request in request_iterator:
            named = request.table.base_path
            if table is None:
                table = self._table_uri(named)
            elif named and self._table_uri(named) != table:
                raise InvalidArgumentError(
                    f"names {named!r} but the stream is on {table}", field="table.base_path"
                )
            locations, found = await asyncio.to_thread(
                self._lookup, table, request.keys, request.as_of_instant
            )
            yield pb.StreamLookupResponse(locations=locations, found=found)

    async def StageChanges(  # noqa: N802 (gRPC method name)
        self, request: pb.StageChangesRequest, context: Context
    ) -> pb.StageChangesResponse:
        table = self._table_uri(request.table.base_path)
        staged = await asyncio.to_thread(self._stage, table, request.instant_time, request.changes)
        return pb.StageChangesResponse(staged=staged)

    async def DiscardInstant(  # noqa: N802 (gRPC method name)
        self, request: pb.DiscardInstantRequest, context: Context
    ) -> pb.DiscardInstantResponse:
        table = self._table_uri(request.table.base_path)
        instant = requests.instant_time(request.instant_time)
        discarded = await asyncio.to_thread(self._discard, table, instant)
        return pb.DiscardInstantResponse(discarded=discarded)

    async def BuildStatus(  # noqa: N802 (gRPC method name)
        self, request: pb.BuildStatusRequest, context: Context
    ) -> pb.BuildStatusResponse:
        table = self._table_uri(request.table.base_path)
        status = await asyncio.to_thread(self.tables.status, table)
        return pb.BuildStatusResponse(
            exists=status.exists,
            shards=status.shards,
            as_of_instant=status.as_of,
            build_in_progress=status.build_in_progress,
            format_version=status.format_version,
        )

    async def Stats(  # noqa: N802 (gRPC method name)
        self, request: pb.StatsRequest, context: Context
    ) -> pb.StatsResponse:
        table = self._table_uri(request.table.base_path)
        stats = await asyncio.to_thread(lambda: self.tables.index(table).stats())
        cache = self.tables.cache.stats()
        reads = cache.hits + cache.misses
        return pb.StatsResponse(
            entries=stats.entries,
            shards=stats.shards,
            bytes=stats.bytes,
            delta_files=stats.delta_files,
            max_shard_deltas=stats.max_shard_deltas,
            block_cache=pb.BlockCacheStats(
                hits=cache.hits,
                misses=cache.misses,
                hit_rate=cache.hits / reads if reads else 0.0,
                bytes=cache.bytes,
                capacity_bytes=cache.budget_bytes,
            ),
        )

    async def Compact(  # noqa: N802 (gRPC method name)
        self, request: pb.CompactRequest, context: Context
    ) -> pb.CompactResponse:
        table = self._table_uri(request.table.base_path)
        require_non_negative("min_deltas", request.min_deltas)
        done = await asyncio.to_thread(
            lambda: self.tables.index(table).compact(max(request.min_deltas, 1))
        )
        return pb.CompactResponse(
            shards_compacted=len(done.shards),
            deltas_folded=done.deltas_folded,
            manifests_deleted=done.manifests_deleted,
        )

    def _lookup(self, table: str, payload: bytes, as_of_instant: str) -> tuple[bytes, int]:
        """One batch, in a thread: the encoded locations and how many keys were found."""
        began = time.perf_counter()
        keys = requests.keys(payload, self._limits())
        as_of = requests.as_of(as_of_instant)
        located = self.tables.index(table).lookup(keys, as_of)
        found = len(located) - located["partition"].null_count
        encoded = arrow_ipc.encode(located.select(LOCATION_COLUMNS))
        self.metrics.observe_lookup(time.perf_counter() - began, len(keys), found)
        return encoded, found

    def _stage(self, table: str, instant_time: str, payload: bytes) -> int:
        instant = requests.instant_time(instant_time)
        changes = requests.changes(payload, self._limits())
        self.tables.index(table).stage(instant, changes)
        self.tables.compactor.wake()
        return len(changes)

    def _limits(self) -> requests.BatchLimits:
        config = self.tables.config
        return requests.BatchLimits(
            config.max_batch_keys, config.max_key_bytes, self.max_decoded_bytes
        )

    def _discard(self, table: str, instant: str) -> bool:
        return self.tables.index(table).discard(instant) > 0
