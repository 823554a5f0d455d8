"""Ranged reads on both backends: what index shards use to fetch only the blocks they need."""

from __future__ import annotations

import pytest

from tidemark.errors import NotFoundError
from tidemark.storage import Storage


def test_read_range_returns_the_requested_bytes(storage: Storage) -> None:
    data = bytes(range(256)) * 4
    storage.write("shards/a.bin", data)
    before = storage.requests.snapshot().get("get", 0)

    assert storage.read_range("shards/a.bin", 0, 10) == data[:10]
    assert storage.read_range("shards/a.bin", 300, 200) == data[300:500]
    assert storage.read_range("shards/a.bin", 1000, 100) == data[1000:]
    assert storage.requests.snapshot()["get"] - before == 3


def test_read_range_of_a_missing_object_is_not_found(storage: Storage) -> None:
    with pytest.raises(NotFoundError):
        storage.read_range("shards/none.bin", 0, 10)
