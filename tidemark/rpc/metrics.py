"""Prometheus metrics for every RPC, served over HTTP on the metrics port.

Each server owns a ``CollectorRegistry`` (several servers can share a test process);
services register their own metrics on the same registry through ``ServiceContext``.
Error counts by code are ``grpc_server_handled_total`` with ``grpc_code`` other than OK.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from wsgiref.simple_server import WSGIServer

import grpc
from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server

from tidemark.errors import ConfigError
from tidemark.rpc.guard import Guard, GuardingInterceptor, current_code


class MetricsInterceptor(GuardingInterceptor):
    """Counts started/handled calls and observes latency per service, method and code."""

    def __init__(self, registry: CollectorRegistry) -> None:
        super().__init__()
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

    def guard_for(self, method: str) -> Guard:
        service, _, name = method.lstrip("/").rpartition("/")
        started = self._started.labels(service, name)
        latency = self._latency.labels(service, name)

        @asynccontextmanager
        async def guard(context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[None]:
            started.inc()
            start = time.perf_counter()
            code = grpc.StatusCode.UNKNOWN
            try:
                yield
                code = current_code(context) or grpc.StatusCode.OK
            except (asyncio.CancelledError, GeneratorExit):
                code = grpc.StatusCode.CANCELLED
                raise
            except Exception:
                code = current_code(context) or grpc.StatusCode.UNKNOWN
                raise
            finally:
                latency.observe(time.perf_counter() - start)
                self._handled.labels(service, name, code.name).inc()

        return guard


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
