"""Synthetic record keys and their locations, shared by the index benchmarks."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from tidemark.index.keys import EncodedKeys, uuid_from_bytes

AS_OF = "20240101000000000"
FILE_GROUPS = 1000
PARTITIONS = 100


def uuid_keys(count: int, rng: np.random.Generator) -> pa.Array:
    """``count`` random canonical UUID strings, generated without a Python loop."""
    raw = np.frombuffer(rng.bytes(16 * count), "S16")
    text = uuid_from_bytes(raw)
    return EncodedKeys(text, np.full(count, 36, np.int64)).to_arrow()


def entry_columns(keys: pa.Array) -> dict[str, pa.Array]:
    """Locations: key i in file group i % FILE_GROUPS, each group in one partition."""
    groups = np.arange(len(keys)) % FILE_GROUPS
    group_ids = uuid_keys(FILE_GROUPS, np.random.default_rng(7))
    file_ids = pa.array([f"{group}-0" for group in group_ids.to_pylist()])
    partitions = pa.array([f"dt=2024-01-{g % PARTITIONS:03d}" for g in range(FILE_GROUPS)])
    rows = pa.array(groups)
    return {
        "partition": partitions.take(rows),
        "file_id": file_ids.take(rows),
        "instant": pa.array(np.full(len(keys), AS_OF, object), pa.string()),
    }
