"""An in-process marker service on a loopback ephemeral port, like Hudi's embedded
timeline server: ``tidemark write`` and the demo use it when no service address is set.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType

from services.marker import marker_service
from services.marker.config import MarkerConfig
from services.marker.engine import MarkerEngine
from tidemark.config import ServerConfig
from tidemark.rpc.server import RunningServer, build_server

STOP_GRACE_S = 5.0


class EmbeddedMarkerService:
    """A running embedded service: ``address`` for MarkerSpec, ``stop()`` or ``with``."""

    def __init__(self, server: RunningServer, engine: MarkerEngine) -> None:
        self._server = server
        self._engine = engine
        self.address = f"127.0.0.1:{server.port}"
        self.metrics_port = server.metrics_port

    def storage_requests(self) -> dict[str, int]:
        """Storage requests the service made for markers, by operation (for reports)."""
        return self._engine.storage_requests()

    def stop(self) -> None:
        """Let in-flight creates finish their flush, then release the marker dir leases."""
        self._server.stop(STOP_GRACE_S)

    def __enter__(self) -> EmbeddedMarkerService:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def start_embedded_marker_service(
    *,
    allowed_roots: Sequence[str] = (),
    config: MarkerConfig | None = None,
) -> EmbeddedMarkerService:
    """Start the service on 127.0.0.1 with a free gRPC port and a free metrics port."""
    server_config = ServerConfig(
        host="127.0.0.1",
        port=0,
        metrics_port=0,
        allowed_roots=tuple(allowed_roots),
    )
    engine = MarkerEngine(config or MarkerConfig.load())
    server = build_server(server_config, [marker_service(engine=engine)])
    return EmbeddedMarkerService(server, engine)
