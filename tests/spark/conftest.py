"""Fixtures of the Spark job tests (the shared SparkSession is in tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.spark


@pytest.fixture
def table_uri(tmp_path: Path) -> str:
    return str(tmp_path / "table")
