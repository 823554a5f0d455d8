"""Prometheus view of the marker engine: storage requests, dirs in memory, queue depth.

A collector reads the engine's counters at scrape time, so the hot path pays nothing;
benchmarks scrape ``tidemark_marker_storage_requests_total`` to count the service's
storage requests.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from services.marker.engine import MarkerEngine

STORAGE_REQUESTS = "tidemark_marker_storage_requests"


class MarkerMetrics(Collector):
    def __init__(self, engine: MarkerEngine) -> None:
        self.engine = engine

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            STORAGE_REQUESTS,
            "Storage requests of the marker service, by operation.",
            labels=["operation"],
        )
        for operation, count in sorted(self.engine.storage_requests().items()):
            requests.add_metric([operation], count)
        yield requests
        yield GaugeMetricFamily(
            "tidemark_marker_dirs", "Marker dirs held in memory.", value=self.engine.dir_count()
        )
        yield GaugeMetricFamily(
            "tidemark_marker_unanswered",
            "Markers accepted and not yet flushed.",
            value=self.engine.unanswered(),
        )
