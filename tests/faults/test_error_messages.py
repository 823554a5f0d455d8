"""S3 set-up errors reach the CLI as one line naming what failed (bucket, credentials,
permission, endpoint), exit 2, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

from tidemark.storage.retry import MAX_ATTEMPTS_ENV
from tidemark.table import HoodieTable
from tidemark.table.properties.config import TableConfig
from tidemark.testing.s3local import FaultProxy, free_port


def _tidemark(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tidemark.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def _one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.fixture
def s3_table(s3_bucket: str) -> str:
    """An existing (empty) table on the local S3 server."""
    config = TableConfig(
        name="t",
        record_key_fields=("id",),
        partition_fields=(),
        precombine_field=None,
        hive_style=False,
        avro_schema='{"type":"record","name":"t","fields":[{"name":"id","type":"int"}]}',
        key_generator_class=TableConfig.default_key_generator(("id",), ()),
    )
    HoodieTable.create(s3_bucket, config)
    return s3_bucket


@pytest.fixture
def proxy_env(s3_server: str) -> Iterator[tuple[FaultProxy, dict[str, str]]]:
    with FaultProxy(s3_server) as proxy:
        yield proxy, {**os.environ, "AWS_ENDPOINT_URL": proxy.endpoint}


def test_a_missing_bucket_is_named(s3_server: str) -> None:
    bucket = f"tm-missing-{uuid.uuid4().hex[:8]}"
    line = _one_line_error(_tidemark("read", "--table", f"s3://{bucket}/t", env=dict(os.environ)))
    assert f"bucket {bucket!r} does not exist" in line
    assert "not a Hudi table" not in line


def test_missing_credentials_are_named(s3_table: str, tmp_path: os.PathLike[str]) -> None:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
    }
    env |= {
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path) + "/none",
        "AWS_CONFIG_FILE": str(tmp_path) + "/none",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    line = _one_line_error(_tidemark("show", "--table", s3_table, env=env))
    assert "credentials" in line and "AWS_ACCESS_KEY_ID" in line


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("InvalidAccessKeyId", "the AWS access key id is not known"),
        ("AccessDenied", "access denied to get"),
    ],
)
def test_refused_credentials_are_named_with_the_endpoint(
    s3_table: str, proxy_env: tuple[FaultProxy, dict[str, str]], code: str, expected: str
) -> None:
    proxy, env = proxy_env
    proxy.fail_always(status=403, code=code)
    line = _one_line_error(_tidemark("read", "--table", s3_table, env=env))
    assert expected in line and proxy.endpoint in line


def test_an_unreachable_endpoint_is_named(s3_table: str) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    env = {**os.environ, "AWS_ENDPOINT_URL": endpoint, MAX_ATTEMPTS_ENV: "1"}
    line = _one_line_error(_tidemark("show", "--table", s3_table, env=env))
    assert endpoint in line
