"""Builds and runs the gRPC servers hosting Tidemark services.

Servers are asyncio (``grpc.aio``): a call waiting for a batch costs a coroutine, not a
thread, so hundreds of writers blocked on a marker flush are cheap. Servicers are
``async def``; blocking work (storage) goes to threads. Every server gets the same
runtime: standard health (per service and overall ``""``), reflection, Prometheus
metrics on a separate HTTP port, and one interceptor for metrics, error mapping and the
log context of every call, which also admits calls (bearer token, per-client
concurrency; see ``tidemark.rpc.auth``). TLS credentials are dynamic: certificate, key and
client CA are re-read for new connections when their files change, so a renewed
certificate needs no restart. With ``health_port`` the health service alone also answers
in plaintext on that port, for probes that cannot speak TLS or send a token.

Health follows the replica's life: NOT_SERVING (overall ``""`` and each service) from
the moment the port answers until every readiness check a service registered has passed
(e.g. caches loaded), SERVING then, and NOT_SERVING again from the start of shutdown:
health flips first, in-flight calls get the grace period to finish while the health
port still answers, then service objects are closed. Connections close after a jittered
maximum age (``tidemark.rpc.options``), so clients of several replicas rebalance.

Two servers share the event loop, each with its own transport limit, since gRPC reads a
whole message up to that limit as soon as a handler asks for one (``tidemark.rpc.limits``):
the port clients dial serves health, reflection, ``RoutesService`` and every method
whose requests are small; the bulk port serves the methods allowed more than
``BULK_ABOVE`` (none: no bulk server). Clients ask ``RoutesService`` which methods are
on which port (``tidemark.rpc.routes``), so they are configured with one address.
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import socket
import threading
from collections.abc import Coroutine, Mapping, Sequence
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
from tidemark.rpc.auth import CallGuard
from tidemark.rpc.client import forget_loopback_channels
from tidemark.rpc.interceptor import BulkReading, ServerCallInterceptor
from tidemark.rpc.limits import SMALL_REQUEST_BYTES, ByteBudget, MethodPolicy, receive_limit
from tidemark.rpc.metrics import BudgetMetrics, MetricsEndpoint, RpcMetrics
from tidemark.rpc.options import jittered_ms, server_options
from tidemark.rpc.pod_metrics import PodMetrics
from tidemark.rpc.registry import Closeable, ServiceContext, ServiceDefinition
from tidemark.rpc.routes import ROUTES_POLICIES, ROUTES_SERVICE, add_routes, split_server

log = structlog.get_logger(__name__)

OVERALL_HEALTH = ""
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})
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
        started: _Started,
        closeables: list[Closeable],
        metrics: MetricsEndpoint,
    ) -> None:
        self._loop = loop
        self._started = started
        self._health = started.health
        self._closeables = closeables
        self._metrics = metrics
        self._stop_lock = threading.Lock()
        self._stopped = threading.Event()
        self.port = started.port
        self.bulk_port = started.bulk_port
        self.advertise_address = started.advertise_address
        self.health_port = started.health_port
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
            self._loop.run(_stop_servers(self._started, grace))
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
    """Start a server for ``services`` on ``config.port`` (0 = a free port); returns once
    their readiness checks passed and health reports SERVING (a failed check stops the
    server and raises). With ``reuse_port`` other processes of the same user may bind the
    port too (workers)."""
    registry = CollectorRegistry()
    PodMetrics(registry, config.tls_cert_path)
    metrics = MetricsEndpoint(registry, config.host, config.metrics_port)
    loop = _LoopThread()
    closeables: list[Closeable] = []
    try:
        started = loop.run(_start(config, services, registry, closeables, reuse_port))
    except BaseException:
        _close_all(closeables)
        metrics.close()
        loop.close()
        raise
    forget_loopback_channels(started.port)
    if started.bulk_port is not None:
        forget_loopback_channels(started.bulk_port)
    log.info(
        "server started",
        host=config.host,
        port=started.port,
        bulk_port=started.bulk_port,
        advertise_address=started.advertise_address,
        health_port=started.health_port,
        metrics_port=metrics.port,
        tls=config.tls,
        mutual_tls=config.tls_client_ca_path is not None,
        tokens=config.auth_token_file is not None,
        services=[service.name for service in services],
    )
    return RunningServer(loop, started, closeables, metrics)


@dataclasses.dataclass(frozen=True)
class _Started:
    server: grpc.aio.Server
    health: HealthServicer
    port: int
    advertise_address: str
    bulk_server: grpc.aio.Server | None = None
    bulk_port: int | None = None
    health_server: grpc.aio.Server | None = None
    health_port: int | None = None


async def _start(
    config: ServerConfig,
    services: Sequence[ServiceDefinition],
    metrics: CollectorRegistry,
    closeables: list[Closeable],
    reuse_port: bool,
) -> _Started:
    """Bind, add the services, answer health NOT_SERVING while their readiness checks
    run, then SERVING."""
    policies = {path: policy for service in services for path, policy in service.policies().items()}
    bulk = {path: policy for path, policy in policies.items() if policy.bulk}
    small = {path: policy for path, policy in policies.items() if not policy.bulk}
    rpc_metrics = RpcMetrics(metrics)
    guard = CallGuard(config, metrics)
    closeables.append(guard)
    server = _server(
        config,
        ServerCallInterceptor(
            rpc_metrics, guard, {**small, **ROUTES_POLICIES}, config.max_message_bytes, None
        ),
        receive_limit(small.values(), config.max_message_bytes),
        reuse_port,
    )
    port = _bind(server, config, config.port, "port", reuse_port)
    bulk_server, bulk_port = None, None
    if bulk:
        bulk_server = _bulk_server(config, bulk, rpc_metrics, guard, metrics, reuse_port)
        bulk_port = _bind(bulk_server, config, config.bulk_port_for(port), "bulk_port", reuse_port)
    context = ServiceContext(
        config=config, metrics=metrics, advertise_address=advertise_address(config, port)
    )
    split = split_server(server, bulk_server, frozenset(bulk))
    closeables.extend(service.add_to_server(split, context) for service in services)
    add_routes(server, {path: bulk_port for path in bulk if bulk_port is not None})
    health_servicer: HealthServicer = health_aio.HealthServicer()
    names = (OVERALL_HEALTH, *(service.full_name for service in services))
    for name in names:
        await health_servicer.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        [
            *(service.full_name for service in services),
            ROUTES_SERVICE,
            health.SERVICE_NAME,
            reflection.SERVICE_NAME,
        ],
        server,
    )
    started = _Started(
        server, health_servicer, port, context.advertise_address, bulk_server, bulk_port
    )
    try:
        await server.start()
        if bulk_server is not None:
            await bulk_server.start()
        if config.health_port is not None:
            health_server = grpc.aio.server(options=_health_options())
            health_pb2_grpc.add_HealthServicer_to_server(health_servicer, health_server)
            health_port = _bind_insecure(
                health_server, config.host, config.health_port, "health_port"
            )
            await health_server.start()
            started = dataclasses.replace(
                started, health_server=health_server, health_port=health_port
            )
        for check in context.readiness_checks:
            await check()
    except BaseException:
        await _stop_servers(started, 0)
        raise
    for name in names:
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return started


def _server(
    config: ServerConfig,
    interceptor: ServerCallInterceptor,
    receive_bytes: int,
    reuse_port: bool,
) -> grpc.aio.Server:
    """A server refusing, unread, any request over ``receive_bytes``."""
    return grpc.aio.server(
        interceptors=[interceptor],
        options=server_options(
            max_message_bytes=config.max_message_bytes,
            max_receive_bytes=receive_bytes,
            keepalive_time_ms=config.keepalive_time_ms,
            keepalive_timeout_ms=config.keepalive_timeout_ms,
            max_connection_age_ms=jittered_ms(config.max_connection_age_s),
            max_connection_age_grace_ms=round(config.max_connection_age_grace_s * 1000),
            reuse_port=reuse_port,
        ),
        maximum_concurrent_rpcs=config.max_concurrent_rpcs,
    )


def _bulk_server(
    config: ServerConfig,
    policies: Mapping[str, MethodPolicy],
    rpc_metrics: RpcMetrics,
    guard: CallGuard,
    metrics: CollectorRegistry,
    reuse_port: bool,
) -> grpc.aio.Server:
    """The server of the methods allowed large requests: each message read only within
    its caller's share of the request budget (its metrics on ``metrics``)."""
    budget = ByteBudget(config.max_request_memory_bytes, config.max_caller_request_memory_bytes)
    metrics.register(BudgetMetrics(budget))
    limit = receive_limit(policies.values(), config.max_message_bytes)
    reading = BulkReading(budget, limit, config.request_idle_s)
    interceptor = ServerCallInterceptor(
        rpc_metrics, guard, policies, config.max_message_bytes, reading
    )
    return _server(config, interceptor, limit, reuse_port)


def _health_options() -> list[tuple[str, int]]:
    """The plaintext health port reads health checks only: small ones."""
    return [("grpc.max_receive_message_length", SMALL_REQUEST_BYTES), ("grpc.http2.bdp_probe", 0)]


async def _stop_servers(started: _Started, grace: float | None) -> None:
    if started.bulk_server is not None:
        await asyncio.gather(started.server.stop(grace), started.bulk_server.stop(grace))
    else:
        await started.server.stop(grace)
    if started.health_server is not None:
        await started.health_server.stop(0)


def advertise_address(config: ServerConfig, port: int) -> str:
    """``config.advertise_address``, else the bound host (this host's name when bound to
    every interface, which is no address to dial) and ``port``."""
    if config.advertise_address is not None:
        return config.advertise_address
    host = config.host
    if host.strip("[]") in WILDCARD_HOSTS:
        host = socket.gethostname()
    return f"{host}:{port}"


def _close_all(closeables: list[Closeable]) -> None:
    for closeable in reversed(closeables):
        closeable.close()


def _check_port_free(config: ServerConfig, port: int, field: str, reuse_port: bool) -> None:
    """Probe the port before gRPC binds it: gRPC reports a busy port with a multi-line
    C-core log, the operator should see one line naming the port. With ``reuse_port``
    the probe succeeds where a sibling worker holds the port, as the bind will."""
    if port == 0:
        return
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            config.host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if reuse_port:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            probe.bind(address)
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise ConfigError(f"port {port} is already in use", field=field) from None
        raise ConfigError(
            f"cannot bind {config.host}:{port}: {error.strerror}", field="host"
        ) from None


def _bind(
    server: grpc.aio.Server, config: ServerConfig, port: int, field: str, reuse_port: bool
) -> int:
    _check_port_free(config, port, field, reuse_port)
    if not config.tls:
        return _bind_insecure(server, config.host, port, field)
    try:
        bound = server.add_secure_port(f"{config.host}:{port}", _credentials(config))
    except RuntimeError:
        bound = 0
    if bound == 0:
        raise ConfigError(f"port {port} is already in use", field=field)
    return bound


def _bind_insecure(server: grpc.aio.Server, host: str, port: int, field: str) -> int:
    try:
        bound = server.add_insecure_port(f"{host}:{port}")
    except RuntimeError:
        bound = 0
    if bound == 0:
        raise ConfigError(f"port {port} is already in use", field=field)
    return bound


class _CertificateFiles:
    """Certificate, key and client CA as of their last change: gRPC asks for a new
    configuration at each handshake, and gets one only when a file changed."""

    def __init__(self, config: ServerConfig) -> None:
        self._paths = tuple(
            path
            for path in (config.tls_cert_path, config.tls_key_path, config.tls_client_ca_path)
            if path is not None
        )
        self._config = config
        self._version = self._stat()

    def _stat(self) -> tuple[tuple[int, int], ...]:
        stats = [Path(path).stat() for path in self._paths]
        return tuple((stat.st_mtime_ns, stat.st_size) for stat in stats)

    def load(self) -> Any:
        """The certificate configuration from the files now."""
        cert, key = self._config.tls_cert_path, self._config.tls_key_path
        assert cert is not None and key is not None
        ca = self._config.tls_client_ca_path
        return grpc.ssl_server_certificate_configuration(
            [(Path(key).read_bytes(), Path(cert).read_bytes())],
            root_certificates=Path(ca).read_bytes() if ca else None,
        )

    def fetch(self) -> Any:
        """A new configuration when a file changed, else None (keep the current one); a
        half-written renewal is retried at the next handshake."""
        try:
            version = self._stat()
            if version == self._version:
                return None
            loaded = self.load()
        except OSError as error:
            log.warning("TLS files unreadable, keeping the current ones", error=error.strerror)
            return None
        self._version = version
        log.info("TLS certificate reloaded")
        return loaded


def _credentials(config: ServerConfig) -> grpc.ServerCredentials:
    files = _CertificateFiles(config)
    return grpc.dynamic_ssl_server_credentials(
        files.load(),
        files.fetch,
        require_client_authentication=config.tls_client_ca_path is not None,
    )
