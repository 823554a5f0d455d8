"""Spark writes whose marker service is three replicas: behind one round-robin target
the write succeeds without the user doing anything, and only the replica owning the
instant's marker dir ever created a marker (the others sent the executors there); an
upsert through a ``dns:///`` address succeeds too."""

from __future__ import annotations

from pathlib import Path

import pytest
from marker.conftest import metric
from pyspark.sql import SparkSession
from spark.clikit import Cli
from spark.sparkkit import assert_readers_agree

from tidemark.services.marker import FULL_NAME as MARKER

from .conftest import StartReplica, round_robin_target

DATA = ["id", "name", "part", "ts"]
CREATES = ("CreateMarker", "CreateMarkers")


def handled(metrics_port: int, code: str) -> float:
    """Marker creates this replica answered with ``code``."""
    return sum(
        metric(
            metrics_port,
            "grpc_server_handled_total",
            grpc_service=MARKER,
            grpc_method=method,
            grpc_code=code,
        )
        for method in CREATES
    )


def test_a_spark_write_through_three_marker_replicas(
    spark: SparkSession,
    start_replica: StartReplica,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    replicas = [start_replica("marker") for _ in range(3)]
    table = str(tmp_path / "orders")
    rows = [{"id": i, "name": f"v1-{i}", "part": "abcd"[i % 4], "ts": 1} for i in range(80)]
    options = ["--key", "id", "--partition", "part", "--precombine", "ts", "--op", "bulk_insert"]
    service = ["--markers", "service", "--marker-service", round_robin_target(replicas)]

    cli = Cli(tmp_path, capfd)

    code, err = cli.write(table, rows, *options, *service)

    assert code == 0, err
    created = sorted(handled(replica.metrics_port, "OK") for replica in replicas)
    assert created[0] == created[1] == 0 < created[2], created  # the owner alone
    changed = [
        {"id": i, "name": f"v2-{i}", "part": "abcd"[i % 4], "ts": 2} for i in range(0, 80, 8)
    ]
    dns = f"dns:///localhost:{replicas[1].port}"
    code, err = cli.write(
        table, changed, "--op", "upsert", "--markers", "service", "--marker-service", dns
    )
    assert code == 0, err
    result = assert_readers_agree(table, DATA)
    assert {key: row["name"] for key, row in result.items()} == {
        str(i): f"v2-{i}" if i % 8 == 0 else f"v1-{i}" for i in range(80)
    }
