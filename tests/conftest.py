"""Shared fixtures: the real moto S3 server process, fresh buckets, local roots."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tidemark.storage.s3 import s3_client
from tidemark.testing.s3local import FaultProxy, LocalS3Server

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """Endpoint URL of a moto server started once per session.

    The standard AWS variables point boto3 (and so every S3Storage, also in
    subprocesses) at it for the whole session.
    """
    with LocalS3Server() as server, pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_ENDPOINT_URL", server.endpoint)
        patch.setenv("AWS_ACCESS_KEY_ID", "tidemark-test")
        patch.setenv("AWS_SECRET_ACCESS_KEY", "tidemark-test")
        patch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        patch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
        patch.delenv("AWS_PROFILE", raising=False)
        yield server.endpoint


@pytest.fixture
def faulty_s3(s3_server: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    """A FaultProxy in front of moto; storages opened in the test (and processes it
    starts) go through it."""
    with FaultProxy(s3_server) as fault_proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", fault_proxy.endpoint)
        yield fault_proxy


@pytest.fixture
def s3_bucket(s3_server: str) -> str:
    """``s3://<fresh bucket>/table``: an empty S3 root for one test."""
    bucket = f"tm-{uuid.uuid4().hex[:16]}"
    s3_client().create_bucket(Bucket=bucket)
    return f"s3://{bucket}/table"


@pytest.fixture
def local_root(tmp_path: Path) -> str:
    """Path of a fresh, empty local directory to use as a storage root."""
    root = tmp_path / "root"
    root.mkdir()
    return str(root)


@pytest.fixture(scope="session")
def spark(s3_server: str) -> Iterator[SparkSession]:
    """One local SparkSession for all Spark tests (started after the S3 server so executors
    inherit its AWS_* settings); ``local[2,4]`` = two cores, four attempts per task.
    pyspark is imported here, not at the top, so tests without Spark never load it."""
    from tidemark.jobs.session import build_session

    session = build_session("local[2,4]", app_name="tidemark-tests", shuffle_partitions=4)
    master = session.sparkContext.master
    assert master == "local[2,4]", f"another test left a {master} session (no task retries)"
    yield session
    session.stop()
