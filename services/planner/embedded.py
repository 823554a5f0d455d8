"""An in-process planner service on a loopback ephemeral port: ``tidemark cluster``
uses it when no ``--planner-service`` address is given."""

from __future__ import annotations

from tidemark.rpc.embedded import EmbeddedServer, start_loopback_server
from tidemark.services.planner import planner_service
from tidemark.services.planner.config import PlannerConfig


def start_embedded_planner_service(config: PlannerConfig | None = None) -> EmbeddedServer:
    """Start the service on 127.0.0.1 with a free gRPC port and a free metrics port."""
    return EmbeddedServer(start_loopback_server([planner_service(config or PlannerConfig.load())]))
