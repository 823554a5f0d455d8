"""Prometheus metrics for every RPC, served over HTTP on the metrics port.

Each server owns a ``CollectorRegistry`` (several servers can share a test process);
services register their own metrics on the same registry through ``ServiceContext``.
Error counts by code are ``grpc_server_handled_total`` with ``grpc_code`` other than OK.
"""

from __future__ import annotations

import errno
import time
from wsgiref.simple_server import WSGIServer

import grpc
from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server

from tidemark.errors import ConfigError


class RpcMetrics:
    """Started/handled calls and latency per service, method and status code."""

    def __init__(self, registry: CollectorRegistry) -> None:
        labels = ["grpc_service", "grpc_method"]
        self.started = Counter(
            "grpc_server_started", "RPCs started on the server.", labels, registry=registry
        )
        self.handled = Counter(
            "grpc_server_handled",
            "RPCs completed on the server, by status code.",
            [*labels, "grpc_code"],
            registry=registry,
        )
        self.latency = Histogram(
            "grpc_server_handling_seconds",
            "Time from the start of an RPC to its completion.",
            labels,
            registry=registry,
        )

    def for_method(self, method: str) -> MethodMetrics:
        """The metrics of ``method`` (the full ``/package.Service/Method``)."""
        service, _, name = method.lstrip("/").rpartition("/")
        return MethodMetrics(self, service, name)


class MethodMetrics:
    """One method's metric children, resolved once: ``labels()`` is a locked dict
    lookup that would otherwise run several times per call."""

    def __init__(self, metrics: RpcMetrics, service: str, name: str) -> None:
        self._metrics = metrics
        self._service = service
        self._name = name
        self._started = metrics.started.labels(service, name)
        self._latency = metrics.latency.labels(service, name)
        self._handled: dict[grpc.StatusCode, Counter] = {}

    def start(self) -> float:
        """Count the call; returns its start time for ``finish``."""
        self._started.inc()
        return time.perf_counter()

    def finish(self, began: float, code: grpc.StatusCode) -> None:
        self._latency.observe(time.perf_counter() - began)
        handled = self._handled.get(code)
        if handled is None:
            handled = self._handled[code] = self._metrics.handled.labels(
                self._service, self._name, code.name
            )
        handled.inc()


class MetricsEndpoint:
    """The ``/metrics`` HTTP server; port 0 picks a free port."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        try:
            server, thread = start_http_server(port, addr=host, registry=registry)
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise ConfigError(
                    f"metrics port {port} is already in use on {host} (choose another with "
                    "--metrics-port or TIDEMARK_METRICS_PORT, 0 = a free one)",
                    field="metrics_port",
                ) from None
            raise ConfigError(
                f"cannot listen on {host}:{port}: {error.strerror}", field="metrics_port"
            ) from None
        self._server: WSGIServer = server
        self._thread = thread
        self.port: int = server.server_address[1]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
