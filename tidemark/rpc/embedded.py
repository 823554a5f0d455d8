"""A service hosted inside another process on a loopback ephemeral port, like Hudi's
embedded timeline server: ``tidemark write`` and the CLI use one when no service address
is given. Each service's ``embedded`` module starts it with its own engine. It listens in
plaintext and checks no token; this process's clients dial it so (``config_for``).
"""

from __future__ import annotations

from collections.abc import Sequence

from tidemark.closing import Closing
from tidemark.config import ServerConfig
from tidemark.rpc.client import close_channels, set_embedded
from tidemark.rpc.registry import ServiceDefinition, resolve_services
from tidemark.rpc.server import RunningServer, build_server

STOP_GRACE_S = 5.0


class EmbeddedServer(Closing):
    """A running embedded server: ``address`` for clients, ``close()`` or ``with``."""

    def __init__(self, server: RunningServer) -> None:
        self._server = server
        self.address = f"127.0.0.1:{server.port}"
        self.metrics_port = server.metrics_port
        set_embedded(self.address, True)

    def close(self) -> None:
        """Let in-flight calls finish, then close the services."""
        self._server.stop(STOP_GRACE_S)
        set_embedded(self.address, False)
        close_channels(lambda address: address == self.address)


def start_loopback_server(
    services: Sequence[ServiceDefinition], *, allowed_roots: Sequence[str] = ()
) -> RunningServer:
    """Start ``services`` on 127.0.0.1 with a free gRPC port and a free metrics port."""
    config = ServerConfig(
        host="127.0.0.1", port=0, metrics_port=0, allowed_roots=tuple(allowed_roots)
    )
    return build_server(config, services)


def start_embedded_service(name: str) -> EmbeddedServer:
    """Start the service called ``name`` as ``tidemark serve NAME`` loads it (the registry's
    definition, settings from the env), on loopback: how a Spark job gets an embedded
    service without importing one (services and jobs never import each other)."""
    return EmbeddedServer(start_loopback_server(resolve_services(name)))
