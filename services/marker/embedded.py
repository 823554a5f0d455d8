"""An in-process marker service on a loopback ephemeral port, like Hudi's embedded
timeline server: ``tidemark write`` and the demo use it when no service address is set.
"""

from __future__ import annotations

from collections.abc import Sequence

from tidemark.clock import SYSTEM_CLOCK, Clock
from tidemark.rpc.embedded import EmbeddedServer, start_loopback_server
from tidemark.rpc.server import RunningServer
from tidemark.services.marker import marker_service
from tidemark.services.marker.config import MarkerConfig
from tidemark.services.marker.engine import MarkerEngine


class EmbeddedMarkerService(EmbeddedServer):
    """A running embedded marker service; stopping it flushes in-flight creates and
    releases the marker dir leases."""

    def __init__(self, server: RunningServer, engine: MarkerEngine) -> None:
        super().__init__(server)
        self._engine = engine

    def storage_requests(self) -> dict[str, int]:
        """Storage requests the service made for markers, by operation (for reports)."""
        return self._engine.storage_requests()


def start_embedded_marker_service(
    *,
    allowed_roots: Sequence[str] = (),
    config: MarkerConfig | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> EmbeddedMarkerService:
    """Start the service on 127.0.0.1 with a free gRPC port and a free metrics port;
    ``clock`` dates its marker dir leases and times idle dirs."""
    engine = MarkerEngine(config or MarkerConfig.load(), clock=clock)
    server = start_loopback_server([marker_service(engine=engine)], allowed_roots=allowed_roots)
    return EmbeddedMarkerService(server, engine)
