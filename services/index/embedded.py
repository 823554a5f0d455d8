"""An in-process index service on a loopback ephemeral port: ``tidemark index lookup``
and a writer's driver use it when no index service address is given."""

from __future__ import annotations

from collections.abc import Sequence

from tidemark.rpc.embedded import EmbeddedServer, start_loopback_server
from tidemark.services.index import index_service
from tidemark.services.index.config import IndexConfig
from tidemark.services.index.tables import IndexTables


def start_embedded_index_service(
    *, allowed_roots: Sequence[str] = (), config: IndexConfig | None = None
) -> EmbeddedServer:
    """Start the service on 127.0.0.1 with a free gRPC port and a free metrics port."""
    tables = IndexTables(config or IndexConfig.load())
    server = start_loopback_server([index_service(tables=tables)], allowed_roots=allowed_roots)
    return EmbeddedServer(server)
