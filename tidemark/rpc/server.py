"""Builds and runs a gRPC server hosting Tidemark services.

Servers are asyncio (``grpc.aio``): a call waiting for a batch costs a coroutine, not a
thread, so hundreds of writers blocked on a marker flush are cheap. Servicers are
``async def``; blocking work (storage) goes to threads. Every server gets the same
runtime: standard health (per service and overall ``""``), reflection, Prometheus
metrics on a separate HTTP port, and one interceptor for metrics, error mapping and the
log context of every call.
Shutdown is graceful: health flips to NOT_SERVING, in-flight calls get the grace period
to finish, then service objects are closed.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import threading
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio  # type: ignore[attr-defined]  # stubs predate it
from grpc_reflection.v1alpha import reflection
from prometheus_client import CollectorRegistry

from tidemark.config import ServerConfig
from tidemark.errors import ConfigError
from tidemark.rpc.interceptor import ServerCallInterceptor
from tidemark.rpc.metrics import MetricsEndpoint, RpcMetrics
from tidemark.rpc.options import server_options
from tidemark.rpc.registry import Closeable, ServiceContext, ServiceDefinition

log = structlog.get_logger(__name__)

OVERALL_HEALTH = ""
T = TypeVar("T")


class HealthServicer(Protocol):
    """What the runtime uses of grpc_health's asyncio servicer (untyped in its stubs)."""

    async def set(
        self, service: str, status: health_pb2.HealthCheckResponse.ServingStatus
    ) -> None: ...

    async def enter_graceful_shutdown(self) -> None: ...


class _LoopThread:
    """The server's asyncio event loop on its own thread, so synchronous callers (the
    serve command, an embedded service in a Spark driver, tests) start and stop it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="grpc-loop", daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


class RunningServer:
    """A started server; ``stop`` is idempotent and safe to call from any thread."""

    def __init__(
        self,
        loop: _LoopThread,
        server: grpc.aio.Server,
        health_servicer: HealthServicer,
        closeables: list[Closeable],
        metrics: MetricsEndpoint,
        port: int,
    ) -> None:
        self._loop = loop
        self._server = server
        self._health = health_servicer
        self._closeables = closeables
        self._metrics = metrics
        self._stop_lock = threading.Lock()
        self._stopped = threading.Event()
        self.port = port
        self.metrics_port = metrics.port

    def enter_graceful_shutdown(self) -> None:
        """Report NOT_SERVING for every service so load balancers drain this replica."""
        self._loop.run(self._health.enter_graceful_shutdown())

    def stop(self, grace: float | None) -> None:
        """Refuse new calls, give in-flight calls ``grace`` seconds, then close services."""
        with self._stop_lock:
            if self._stopped.is_set():
                return
            self.enter_graceful_shutdown()
            log.info("shutting down", grace_period_s=grace)
            self._loop.run(self._server.stop(grace))
            _close_all(self._closeables)
            self._metrics.close()
            self._loop.close()
            self._stopped.set()
            log.info("stopped")

    def wait(self, timeout: float | None = None) -> bool:
        """Block until ``stop`` has finished; False if ``timeout`` passed first."""
        return self._stopped.wait(timeout)


def build_server(
    config: ServerConfig, services: Sequence[ServiceDefinition], *, reuse_port: bool = False
) -> RunningServer:
    """Start a server for ``services`` on ``config.port`` (0 = a free port). With
    ``reuse_port`` other processes of the same user may bind the port too (workers)."""
    registry = CollectorRegistry()
    metrics = MetricsEndpoint(registry, config.host, config.metrics_port)
    loop = _LoopThread()
    closeables: list[Closeable] = []
    try:
        server, health_servicer, port = loop.run(
            _start(
                config,
                services,
                ServiceContext(config=config, metrics=registry),
                closeables,
                reuse_port,
            )
        )
    except BaseException:
        _close_all(closeables)
        metrics.close()
        loop.close()
        raise
    log.info(
        "server started",
        host=config.host,
        port=port,
        metrics_port=metrics.port,
        tls=config.tls,
        services=[service.name for service in services],
    )
    return RunningServer(loop, server, health_servicer, closeables, metrics, port)


async def _start(
    config: ServerConfig,
    services: Sequence[ServiceDefinition],
    context: ServiceContext,
    closeables: list[Closeable],
    reuse_port: bool,
) -> tuple[grpc.aio.Server, HealthServicer, int]:
    server = grpc.aio.server(
        interceptors=[ServerCallInterceptor(RpcMetrics(context.metrics))],
        options=server_options(
            max_message_bytes=config.max_message_bytes,
            keepalive_time_ms=config.keepalive_time_ms,
            keepalive_timeout_ms=config.keepalive_timeout_ms,
            reuse_port=reuse_port,
        ),
        maximum_concurrent_rpcs=config.max_concurrent_rpcs,
    )
    closeables.extend(service.add_to_server(server, context) for service in services)
    health_servicer: HealthServicer = health_aio.HealthServicer()
    for name in (OVERALL_HEALTH, *(service.full_name for service in services)):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        [
            *(service.full_name for service in services),
            health.SERVICE_NAME,
            reflection.SERVICE_NAME,
        ],
        server,
    )
    port = _bind(server, config, reuse_port)
    await server.start()
    return server, health_servicer, port


def _close_all(closeables: list[Closeable]) -> None:
    for closeable in reversed(closeables):
        closeable.close()


def _check_port_free(config: ServerConfig, reuse_port: bool) -> None:
    """Probe the port before gRPC binds it: gRPC reports a busy port with a multi-line
    C-core log, the operator should see one line naming the port. With ``reuse_port``
    the probe succeeds where a sibling worker holds the port, as the bind will."""
    if config.port == 0:
        return
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            config.host.strip("[]"), config.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if reuse_port:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            probe.bind(address)
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise ConfigError(f"port {config.port} is already in use", field="port") from None
        raise ConfigError(
            f"cannot bind {config.host}:{config.port}: {error.strerror}", field="host"
        ) from None


def _bind(server: grpc.aio.Server, config: ServerConfig, reuse_port: bool) -> int:
    _check_port_free(config, reuse_port)
    address = f"{config.host}:{config.port}"
    try:
        if config.tls_cert_path is not None and config.tls_key_path is not None:
            credentials = grpc.ssl_server_credentials(
                [(Path(config.tls_key_path).read_bytes(), Path(config.tls_cert_path).read_bytes())]
            )
            port = server.add_secure_port(address, credentials)
        else:
            port = server.add_insecure_port(address)
    except RuntimeError:
        port = 0
    if port == 0:
        raise ConfigError(f"port {config.port} is already in use", field="port")
    return port
