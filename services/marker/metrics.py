"""Prometheus view of the marker engine: storage requests, dirs in memory, queue depth,
and how long MARKERS file flushes take and how many markers each writes.

A collector reads the engine's counters at scrape time, so the create path pays nothing;
flushes (a few per batch interval) observe two histograms. Benchmarks scrape
``tidemark_marker_storage_requests_total`` to count the service's storage requests, and
``tidemark_marker_storage_retries_total`` to tell retries of throttled or failed attempts.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from tidemark.services.marker.engine import MarkerEngine

STORAGE_REQUESTS = "tidemark_marker_storage_requests"
STORAGE_RETRIES = "tidemark_marker_storage_retries"
FLUSH_SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
FLUSH_MARKERS_BUCKETS = (1, 10, 100, 1_000, 10_000, 100_000)


class FlushMetrics:
    """Histograms of MARKERS file flushes, and lease takeovers (a dir whose owner's lease
    ran out: a replica or writer died). Not in a registry of their own: each engine has
    its own, exported by its ``MarkerMetrics``."""

    def __init__(self) -> None:
        self.seconds = Histogram(
            "tidemark_marker_flush_seconds",
            "Time to write one MARKERS file (retries included), by outcome.",
            ["outcome"],
            buckets=FLUSH_SECONDS_BUCKETS,
            registry=None,
        )
        self.markers = Histogram(
            "tidemark_marker_flush_markers",
            "New markers written by one successful MARKERS file flush.",
            buckets=FLUSH_MARKERS_BUCKETS,
            registry=None,
        )
        self.takeovers = Counter(
            "tidemark_marker_lease_takeovers",
            "Marker dirs taken over after their owner's lease ran out.",
            registry=None,
        )

    def observe(self, seconds: float, markers: int, ok: bool) -> None:
        self.seconds.labels("ok" if ok else "failed").observe(seconds)
        if ok:
            self.markers.observe(markers)

    def collect(self) -> Iterator[Metric]:
        yield from self.seconds.collect()
        yield from self.markers.collect()
        yield from self.takeovers.collect()


class MarkerMetrics(Collector):
    def __init__(self, engine: MarkerEngine) -> None:
        self.engine = engine

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            STORAGE_REQUESTS,
            "Storage requests of the marker service, by operation (every attempt).",
            labels=["operation"],
        )
        retries = CounterMetricFamily(
            STORAGE_RETRIES,
            "Storage requests of the marker service that retried a failed attempt.",
            labels=["operation"],
        )
        retried = self.engine.storage_retries()
        for operation, count in sorted(self.engine.storage_requests().items()):
            requests.add_metric([operation], count)
            retries.add_metric([operation], retried.get(operation, 0))
        yield requests
        yield retries
        yield GaugeMetricFamily(
            "tidemark_marker_dirs", "Marker dirs held in memory.", value=self.engine.dir_count()
        )
        yield GaugeMetricFamily(
            "tidemark_marker_unanswered",
            "Markers accepted and not yet flushed.",
            value=self.engine.unanswered(),
        )
        yield from self.engine.flush_metrics.collect()
