"""Helpers for the index service tests: Hudi tables with small record indexes built by
the engine's build API, a real timeline to complete or abandon instants, raw stubs."""

from __future__ import annotations

import urllib.request

import pyarrow as pa
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.index import bench_table_config
from tidemark.index.build import publish_index, write_base_shard
from tidemark.index.sharding import shard_of
from tidemark.rpc import arrow_ipc
from tidemark.storage import Storage
from tidemark.table import HoodieTable

BUILT_AS_OF = "20240101000000000"
SHARDS = 10
KEYS = [
    *(f"uid-{number}" for number in range(200)),
    *(f"ключ-{number}" for number in range(20)),
    "🔑",
    "a\tb\nc",
    "k" * 1000,
]
"""Keys of the built indexes: ASCII, Cyrillic, an emoji, control characters, a long one."""


def create_table(uri: str) -> HoodieTable:
    """An empty COW table keyed by a string ``uid``, partitioned by ``dt`` (the bench's)."""
    return HoodieTable.create(uri, bench_table_config())


def location_of(key: str) -> tuple[str, str]:
    """The (partition, file id) the built indexes give ``key``: a pure function of it."""
    group = sum(key.encode()) % 5
    return f"dt=2024-01-0{group}", f"0000000{group}-aaaa-bbbb-cccc-dddddddddddd-0"


def build_index(storage: Storage, keys: list[str], num_shards: int = SHARDS) -> None:
    """A published index holding ``keys`` at ``location_of`` as of ``BUILT_AS_OF``."""
    array = pa.array(keys, pa.string())
    shards = shard_of(array, num_shards)
    for shard in range(num_shards):
        rows = [index for index, owner in enumerate(shards.tolist()) if owner == shard]
        chosen = [keys[row] for row in rows]
        write_base_shard(
            storage,
            shard,
            num_shards,
            pa.array(chosen, pa.string()),
            pa.array([location_of(key)[0] for key in chosen], pa.string()),
            pa.array([location_of(key)[1] for key in chosen], pa.string()),
            pa.array([BUILT_AS_OF] * len(chosen), pa.string()),
            BUILT_AS_OF,
        )
    publish_index(storage, num_shards, BUILT_AS_OF)


def keys_payload(keys: list[str]) -> bytes:
    return arrow_ipc.encode(pa.table({"key": pa.array(keys, pa.string())}))


def changes_payload(rows: list[tuple[str, str | None, str | None]]) -> bytes:
    key, partition, file_id = zip(*rows, strict=True)
    return arrow_ipc.encode(
        pa.table(
            {
                "key": pa.array(key, pa.string()),
                "partition": pa.array(partition, pa.string()),
                "file_id": pa.array(file_id, pa.string()),
            }
        )
    )


def scrape(port: int) -> dict[str, float]:
    """Every unlabelled sample and each labelled one as ``name{value,...}`` from a real
    /metrics endpoint."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(sample.labels.values())
            samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return samples
