"""Prometheus metrics for every RPC, served over HTTP on the metrics port.

Each server owns a ``CollectorRegistry`` (several servers can share a test process);
services register their own metrics on the same registry through ``ServiceContext``.
Error counts by code are ``grpc_server_handled_total`` with ``grpc_code`` other than OK.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from wsgiref.simple_server import WSGIServer

import grpc
from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server

from tidemark.errors import ConfigError
from tidemark.rpc.guard import current_code, guard_handler


class MetricsInterceptor(grpc.ServerInterceptor):
    """Counts started/handled calls and observes latency per service, method and code."""

    def __init__(self, registry: CollectorRegistry) -> None:
        labels = ["grpc_service", "grpc_method"]
        self._started = Counter(
            "grpc_server_started", "RPCs started on the server.", labels, registry=registry
        )
        self._handled = Counter(
            "grpc_server_handled",
            "RPCs completed on the server, by status code.",
            [*labels, "grpc_code"],
            registry=registry,
        )
        self._latency = Histogram(
            "grpc_server_handling_seconds",
            "Time from the start of an RPC to its completion.",
            labels,
            registry=registry,
        )

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        service, _, method = handler_call_details.method.lstrip("/").rpartition("/")

        @contextmanager
        def guard(context: grpc.ServicerContext) -> Iterator[None]:
            self._started.labels(service, method).inc()
            start = time.perf_counter()
            code = grpc.StatusCode.UNKNOWN
            try:
                yield
                code = current_code(context) or grpc.StatusCode.OK
            except GeneratorExit:
                code = grpc.StatusCode.CANCELLED
                raise
            except Exception:
                code = current_code(context) or grpc.StatusCode.UNKNOWN
                raise
            finally:
                self._latency.labels(service, method).observe(time.perf_counter() - start)
                self._handled.labels(service, method, code.name).inc()

        return guard_handler(handler, guard)


class MetricsEndpoint:
    """The ``/metrics`` HTTP server; port 0 picks a free port."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        try:
            server, thread = start_http_server(port, addr=host, registry=registry)
        except OSError as error:
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
