"""Fixtures of the Spark job tests (the shared SparkSession is in tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from table.log_testkit import extract_mor_fixtures

from spark.sparkkit import TABLE_VERSIONS


@pytest.fixture
def table_uri(tmp_path: Path) -> str:
    return str(tmp_path / "table")


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def local_or_s3_uri(request: pytest.FixtureRequest, table_uri: str) -> str:
    """A fresh table URI on the local filesystem, then on the local S3 server."""
    if request.param == "s3":
        return str(request.getfixturevalue("s3_bucket"))
    return table_uri


@pytest.fixture(params=TABLE_VERSIONS, ids=lambda version: f"v{version}")
def table_version(request: pytest.FixtureRequest) -> int:
    """A write-path test once per table version its table is created at."""
    version: int = request.param
    return version


@pytest.fixture(scope="module")
def mor_tables(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The merge-on-read tables Hudi wrote (tests/fixtures/hudi-mor), extracted once a
    module; tests copy one before changing it."""
    return extract_mor_fixtures(tmp_path_factory.mktemp("hudi-mor"))
