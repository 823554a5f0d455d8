"""Prometheus view of the index service: lookups, keys found and absent, lookup latency
and batch sizes, open tables and the block cache (hits, misses, hit ratio, bytes).

Lookups observe the instruments once per batch (not per key); the cache and table gauges
are read at scrape time, so serving pays nothing for them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from tidemark.services.index.tables import IndexTables

LOOKUP_SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
BATCH_KEYS_BUCKETS = (1, 10, 100, 1_000, 10_000, 100_000, 1_000_000)


class IndexMetrics(Collector):
    """Registered on the server's registry by the service definition."""

    def __init__(self, tables: IndexTables) -> None:
        self.tables = tables
        self.lookup_seconds = Histogram(
            "tidemark_index_lookup_seconds",
            "Time to answer one batch of keys (decode, look up, encode).",
            buckets=LOOKUP_SECONDS_BUCKETS,
            registry=None,
        )
        self.batch_keys = Histogram(
            "tidemark_index_lookup_keys",
            "Keys per looked-up batch.",
            buckets=BATCH_KEYS_BUCKETS,
            registry=None,
        )
        self.keys = Counter(
            "tidemark_index_keys",
            "Keys looked up, by result.",
            ["result"],
            registry=None,
        )
        self._found = self.keys.labels("found")
        self._absent = self.keys.labels("absent")

    def observe_lookup(self, seconds: float, keys: int, found: int) -> None:
        self.lookup_seconds.observe(seconds)
        self.batch_keys.observe(keys)
        self._found.inc(found)
        self._absent.inc(keys - found)

    def collect(self) -> Iterator[Metric]:
        yield from self.lookup_seconds.collect()
        yield from self.batch_keys.collect()
        yield from self.keys.collect()
        cache = self.tables.cache.stats()
        reads = cache.hits + cache.misses
        yield CounterMetricFamily(
            "tidemark_index_block_cache_hits", "Block cache lookups answered.", value=cache.hits
        )
        yield CounterMetricFamily(
            "tidemark_index_block_cache_misses",
            "Block cache lookups that read storage.",
            value=cache.misses,
        )
        yield GaugeMetricFamily(
            "tidemark_index_block_cache_hit_ratio",
            "Hits over all block cache lookups since the start (0 before any).",
            value=cache.hits / reads if reads else 0.0,
        )
        yield GaugeMetricFamily(
            "tidemark_index_block_cache_bytes", "Bytes held by the block cache.", value=cache.bytes
        )
        yield GaugeMetricFamily(
            "tidemark_index_tables_open",
            "Tables whose index is open.",
            value=self.tables.open_count(),
        )
