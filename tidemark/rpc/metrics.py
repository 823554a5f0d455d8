"""Prometheus metrics for every RPC, served over HTTP on the metrics port.

Each server owns a ``CollectorRegistry`` (several servers can share a test process);
services register their own metrics on the same registry through ``ServiceContext``, and
every registry carries the process's own (``process_resident_memory_bytes``, CPU, open
fds, start time) and the Python platform's, and its pod's (``tidemark.rpc.pod_metrics``).
Error counts by code are
``grpc_server_handled_total`` with ``grpc_code`` other than OK; a marker replica's
"ask the owner" answers (FAILED_PRECONDITION on the wire, routine with several replicas)
are also counted in ``tidemark_owner_redirects_total`` (0 for every method until then, so
the alerts' subtraction has a series to subtract), so alerts can leave them out. A server
with a bulk port also exports its request budget (``tidemark_request_budget_*``).
"""

from __future__ import annotations

import bisect
import errno
import itertools
import math
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import grpc
from prometheus_client import (
    CollectorRegistry,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    make_wsgi_app,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from tidemark.errors import ConfigError
from tidemark.rpc.limits import ByteBudget

LATENCY_BUCKETS: tuple[float, ...] = Histogram.DEFAULT_BUCKETS[:-1]
"""Upper bounds of the latency histogram (Prometheus's defaults, +Inf apart)."""


class RpcMetrics(Collector):
    """Started/handled calls and latency per service, method and status code.

    Calls update plain numbers (``MethodMetrics``) and the Prometheus families are built
    from them at scrape time: a Prometheus child takes a lock on every update, three
    times per call, which a marker create of about 150 microseconds of CPU notices."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._methods: list[MethodMetrics] = []
        registry.register(self)
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)

    def for_method(self, method: str, kind: str) -> MethodMetrics:
        """The metrics of ``method`` (the full ``/package.Service/Method``); ``kind`` is
        its ``grpc_type`` (unary, client_stream, server_stream, bidi_stream)."""
        service, _, name = method.lstrip("/").rpartition("/")
        metrics = MethodMetrics(service, name, kind)
        self._methods.append(metrics)
        return metrics

    def collect(self) -> Iterator[Metric]:
        labels = ["grpc_type", "grpc_service", "grpc_method"]
        started = CounterMetricFamily(
            "grpc_server_started", "RPCs started on the server.", labels=labels
        )
        handled = CounterMetricFamily(
            "grpc_server_handled",
            "RPCs completed on the server, by status code.",
            labels=[*labels, "grpc_code"],
        )
        latency = HistogramMetricFamily(
            "grpc_server_handling_seconds",
            "Time from the start of an RPC to its completion.",
            labels=labels,
        )
        redirects = CounterMetricFamily(
            "tidemark_owner_redirects",
            "Calls answered with the owner's address (FAILED_PRECONDITION, not an error).",
            labels=labels,
        )
        for method in list(self._methods):
            names = [method.kind, method.service, method.name]
            started.add_metric(names, method.started)
            redirects.add_metric(names, method.redirects)
            for code, count in list(method.handled.items()):
                handled.add_metric([*names, code.name], count)
            counts = list(method.bucket_counts)
            cumulative = list(itertools.accumulate(counts))
            latency.add_metric(
                names,
                buckets=[
                    (floatToGoString(bound), total)
                    for bound, total in zip((*LATENCY_BUCKETS, math.inf), cumulative, strict=True)
                ],
                sum_value=method.seconds,
            )
        yield started
        yield handled
        yield latency
        yield redirects


class MethodMetrics:
    """One method's counts, updated only on its server's event loop (one thread, so
    plain ``+=`` loses nothing) and read by the scrape thread."""

    __slots__ = (
        "bucket_counts",
        "handled",
        "kind",
        "name",
        "redirects",
        "seconds",
        "service",
        "started",
    )

    def __init__(self, service: str, name: str, kind: str) -> None:
        self.service = service
        self.name = name
        self.kind = kind
        self.started = 0
        self.redirects = 0
        self.handled: dict[grpc.StatusCode, int] = {}
        self.bucket_counts = [0] * (len(LATENCY_BUCKETS) + 1)
        """Calls per latency bucket (not cumulative); the last one is +Inf."""
        self.seconds = 0.0

    def start(self) -> float:
        """Count the call; returns its start time for ``finish``."""
        self.started += 1
        return time.perf_counter()

    def finish(self, began: float, code: grpc.StatusCode) -> None:
        elapsed = time.perf_counter() - began
        self.bucket_counts[bisect.bisect_left(LATENCY_BUCKETS, elapsed)] += 1
        self.seconds += elapsed
        self.handled[code] = self.handled.get(code, 0) + 1


class BudgetMetrics(Collector):
    """The bulk server's request budget, read at scrape time: bytes held and the calls and
    callers waiting for their share (a caller waiting long is starved, or over its
    share), and the calls ended for idling while holding some."""

    def __init__(self, budget: ByteBudget) -> None:
        self._budget = budget

    def collect(self) -> Iterator[Metric]:
        budget = self._budget
        yield GaugeMetricFamily(
            "tidemark_request_budget_capacity_bytes",
            "Bytes of bulk requests the server holds at most (max_request_memory_bytes).",
            value=budget.capacity,
        )
        yield GaugeMetricFamily(
            "tidemark_request_budget_used_bytes",
            "Bytes of the request budget reserved or held by bulk calls now.",
            value=budget.used,
        )
        yield GaugeMetricFamily(
            "tidemark_request_budget_waiting_calls",
            "Bulk calls waiting for request budget now.",
            value=budget.waiting_calls,
        )
        yield GaugeMetricFamily(
            "tidemark_request_budget_waiting_callers",
            "Callers (token, certificate or host) with bulk calls waiting for budget now.",
            value=budget.waiting_callers,
        )
        yield CounterMetricFamily(
            "tidemark_request_budget_waits",
            "Reservations of request budget that had to wait.",
            value=budget.waits,
        )
        yield CounterMetricFamily(
            "tidemark_request_budget_idle_ends",
            "Bulk calls ended for sending no whole message within request_idle_s.",
            value=budget.idle_ends,
        )


SHUTDOWN_POLL_S = 0.02
"""How often the HTTP server's loop looks for a stop request: ``close`` waits at most that
long (``start_http_server``'s loop polls every 0.5 s, which every job's embedded service
paid on its way out)."""


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged, as in prometheus_client's own server."""


class MetricsEndpoint:
    """The ``/metrics`` HTTP server (prometheus_client's WSGI app and threading server);
    port 0 picks a free port."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        try:
            server = _listen(host, port, registry)
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
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": SHUTDOWN_POLL_S},
            name="metrics-http",
            daemon=True,
        )
        self._thread.start()
        self.port: int = server.server_address[1]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def _listen(host: str, port: int, registry: CollectorRegistry) -> WSGIServer:
    """A server bound to ``host`` (IPv4 or IPv6, as the address resolves)."""
    family = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM)[0][0]
    server_class = type("MetricsServer", (ThreadingWSGIServer,), {"address_family": family})
    return make_server(
        host, port, make_wsgi_app(registry), server_class, handler_class=_QuietHandler
    )
