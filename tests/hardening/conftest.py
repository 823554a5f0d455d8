"""Fixtures of the hardening tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

FIXTURE = Path(__file__).parents[1] / "fixtures" / "hudi-v6" / "v6_nonpartitioned"


@pytest.fixture
def table(tmp_path: Path) -> Path:
    """A copy of a table Apache Hudi wrote, alone under ``<tmp>/lake`` (the allowed root)."""
    target = tmp_path / "lake" / "t"
    shutil.copytree(FIXTURE, target)
    return target
