"""One local SparkSession for all Spark tests (started after the S3 server so executors
inherit its AWS_* settings); ``local[2,4]`` = two cores, four attempts per task."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_jobs.session import build_session

pytestmark = pytest.mark.spark


@pytest.fixture(scope="session")
def spark(s3_server: str) -> Iterator[SparkSession]:
    session = build_session("local[2,4]", app_name="tidemark-tests", shuffle_partitions=4)
    master = session.sparkContext.master
    assert master == "local[2,4]", f"another test left a {master} session (no task retries)"
    yield session
    session.stop()


@pytest.fixture
def table_uri(tmp_path: Path) -> str:
    return str(tmp_path / "table")
