"""The record-level index: sorted shard files per table, read and merged by ``RecordIndex``,
served over gRPC by ``IndexService``.

Format and layout: docs/record-index.md. ``SERVICE`` is what ``tidemark serve index``
loads from the runtime's registry; settings come from ``TIDEMARK_INDEX_*`` env vars (see
``config.IndexConfig``).
"""

from __future__ import annotations

import grpc
import structlog

from tidemark.proto.index.v1 import index_service_pb2_grpc as pb_grpc
from tidemark.rpc.auth import Role
from tidemark.rpc.limits import ANY_SIZE, MethodPolicy
from tidemark.rpc.registry import Closeable, ServiceContext, ServiceDefinition
from tidemark.services.index.config import IndexConfig
from tidemark.services.index.metrics import IndexMetrics
from tidemark.services.index.servicer import IndexServicer
from tidemark.services.index.tables import IndexTables

log = structlog.get_logger(__name__)

FULL_NAME = "tidemark.index.v1.IndexService"


METHODS = {
    "Lookup": MethodPolicy(Role.READ, ANY_SIZE),
    "StreamLookup": MethodPolicy(Role.READ, ANY_SIZE),
    "StageChanges": MethodPolicy(Role.WRITE, ANY_SIZE),
    "DiscardInstant": MethodPolicy(Role.WRITE),
    "BuildStatus": MethodPolicy(Role.READ),
    "Stats": MethodPolicy(Role.READ),
    "Compact": MethodPolicy(Role.ADMIN),
}
"""Batches of keys travel up to the server's ``max_message_bytes``; the rest are small."""


def index_service(
    config: IndexConfig | None = None, tables: IndexTables | None = None
) -> ServiceDefinition:
    """The service definition; without ``config`` settings load from the env when served.
    An embedding caller may pass its own ``tables`` to read its cache counters."""

    def add_to_server(server: grpc.aio.Server, context: ServiceContext) -> Closeable:
        served = tables or IndexTables(config or IndexConfig.load())
        metrics = IndexMetrics(served)
        pb_grpc.add_IndexServiceServicer_to_server(
            IndexServicer(served, context.config, metrics), server
        )
        context.metrics.register(metrics)
        log.info(
            "index service ready",
            block_cache_bytes=served.config.block_cache_bytes,
            max_batch_keys=served.config.max_batch_keys,
        )
        return served

    return ServiceDefinition(
        name="index",
        full_name=FULL_NAME,
        add_to_server=add_to_server,
        replicable=True,
        methods=METHODS,
    )


SERVICE = index_service()
