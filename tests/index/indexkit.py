"""Helpers for the record-index tests: UUID keys, location columns, a real timeline."""

from __future__ import annotations

import uuid

import numpy as np
import pyarrow as pa

from tidemark.storage import Storage
from tidemark.table.metadata.actions import COMMIT
from tidemark.table.timeline.instant import new_instant_time
from tidemark.table.timeline.layout1 import Timeline

INSTANT = "20240101000000000"


def uuid_keys(count: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [str(uuid.UUID(bytes=rng.bytes(16), version=4)) for _ in range(count)]


def locations(count: int, groups: int = 7) -> dict[str, pa.Array]:
    """Columns partition, file_id, instant for ``count`` entries over ``groups`` groups."""
    return {
        "partitions": pa.array([f"dt=2024-01-{i % groups:02d}" for i in range(count)]),
        "file_ids": pa.array([f"{uuid.UUID(int=i % groups)}-0" for i in range(count)]),
        "instants": pa.array([INSTANT] * count),
    }


class Commits:
    """Drives the table's real timeline: start, complete and roll back write instants."""

    def __init__(self, storage: Storage) -> None:
        self.timeline = Timeline(storage)

    def start(self) -> str:
        instant = new_instant_time(self.timeline.latest_timestamp())
        self.timeline.create_requested(instant, COMMIT)
        self.timeline.transition_inflight(instant, COMMIT)
        return instant

    def complete(self, instant: str) -> None:
        self.timeline.complete(instant, COMMIT, b"{}")

    def roll_back(self, instant: str) -> None:
        self.timeline.delete_pending(self.timeline.find(instant))
