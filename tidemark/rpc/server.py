"""Builds and runs a gRPC server hosting Tidemark services.

Every server gets the same runtime: standard health (per service and overall ``""``),
reflection, Prometheus metrics on a separate HTTP port, and the error-mapping
interceptor. Shutdown is graceful: health flips to NOT_SERVING, in-flight calls get the
grace period to finish, then service objects are closed.
"""

from __future__ import annotations

import errno
import socket
import threading
from collections.abc import Sequence
from concurrent import futures
from pathlib import Path

import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from prometheus_client import CollectorRegistry

from tidemark.config import ServerConfig
from tidemark.errors import ConfigError
from tidemark.rpc.interceptor import ErrorInterceptor
from tidemark.rpc.metrics import MetricsEndpoint, MetricsInterceptor
from tidemark.rpc.options import server_options
from tidemark.rpc.registry import Closeable, ServiceContext, ServiceDefinition

log = structlog.get_logger(__name__)

OVERALL_HEALTH = ""


class RunningServer:
    """A started server; ``stop`` is idempotent and safe to call from any thread."""

    def __init__(
        self,
        server: grpc.Server,
        health_servicer: health.HealthServicer,
        closeables: list[Closeable],
        metrics: MetricsEndpoint,
        port: int,
    ) -> None:
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
        self._health.enter_graceful_shutdown()

    def stop(self, grace: float | None) -> None:
        """Refuse new calls, give in-flight calls ``grace`` seconds, then close services."""
        with self._stop_lock:
            if self._stopped.is_set():
                return
            self.enter_graceful_shutdown()
            log.info("shutting down", grace_period_s=grace)
            self._server.stop(grace).wait()
            for closeable in reversed(self._closeables):
                closeable.close()
            self._metrics.close()
            self._stopped.set()
            log.info("stopped")

    def wait(self, timeout: float | None = None) -> bool:
        """Block until ``stop`` has finished; False if ``timeout`` passed first."""
        return self._stopped.wait(timeout)


def build_server(config: ServerConfig, services: Sequence[ServiceDefinition]) -> RunningServer:
    """Start a server for ``services`` on ``config.port`` (0 = a free port)."""
    registry = CollectorRegistry()
    metrics = MetricsEndpoint(registry, config.host, config.metrics_port)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=config.max_workers, thread_name_prefix="grpc"),
        interceptors=[MetricsInterceptor(registry), ErrorInterceptor()],
        options=server_options(
            max_message_bytes=config.max_message_bytes,
            keepalive_time_ms=config.keepalive_time_ms,
            keepalive_timeout_ms=config.keepalive_timeout_ms,
        ),
    )
    closeables: list[Closeable] = []
    try:
        context = ServiceContext(config=config, metrics=registry)
        closeables.extend(service.add_to_server(server, context) for service in services)
        health_servicer = _add_health(server, services)
        reflection.enable_server_reflection(
            [
                *(service.full_name for service in services),
                health.SERVICE_NAME,
                reflection.SERVICE_NAME,
            ],
            server,
        )
        port = _bind(server, config)
        server.start()
    except BaseException:
        for closeable in reversed(closeables):
            closeable.close()
        metrics.close()
        raise
    log.info(
        "server started",
        host=config.host,
        port=port,
        metrics_port=metrics.port,
        tls=config.tls,
        services=[service.name for service in services],
    )
    return RunningServer(server, health_servicer, closeables, metrics, port)


def _add_health(
    server: grpc.Server, services: Sequence[ServiceDefinition]
) -> health.HealthServicer:
    servicer = health.HealthServicer()
    for name in (OVERALL_HEALTH, *(service.full_name for service in services)):
        servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    return servicer


def _check_port_free(config: ServerConfig) -> None:
    """Probe the port before gRPC binds it: gRPC reports a busy port with a multi-line
    C-core log, the operator should see one line naming the port."""
    if config.port == 0:
        return
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            config.host.strip("[]"), config.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise ConfigError(f"port {config.port} is already in use", field="port") from None
        raise ConfigError(
            f"cannot bind {config.host}:{config.port}: {error.strerror}", field="host"
        ) from None


def _bind(server: grpc.Server, config: ServerConfig) -> int:
    _check_port_free(config)
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
