"""Fixtures of the record-index tests."""

from __future__ import annotations

import pytest

from tidemark.storage import Storage, open_storage


@pytest.fixture
def local_storage(local_root: str) -> Storage:
    return open_storage(local_root)
