"""A Spark upsert with ``--index record`` given three index service replicas, one of them
killed with -9 before the write: the driver and the executors route around it, and the
index agrees with the table afterwards, read through the replicas left and from storage."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from spark.clikit import Cli
from spark.indexkit import assert_index_agrees, indexed_table
from spark.sparkkit import assert_readers_agree

from tidemark.clients.index import IndexClient
from tidemark.table import HoodieTable
from tidemark.table.metadata.actions import WRITE_ACTIONS

from .index_replicakit import Replica, addresses, running

DATA = ["id", "name", "part", "ts"]


@pytest.fixture
def replicas() -> Iterator[list[Replica]]:
    with running(3) as started:
        yield started


def test_an_upsert_with_a_replica_down_keeps_the_index_exact(
    spark: SparkSession,
    replicas: list[Replica],
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    table = str(tmp_path / "table")
    indexed_table(spark, table, shards=8)
    replicas[1].kill()
    changed = [{"id": k, "name": f"v2-{k}", "part": "abc"[k % 3], "ts": 2} for k in range(0, 12, 3)]
    added = [{"id": k, "name": f"v2-{k}", "part": "abc"[k % 3], "ts": 2} for k in range(12, 40)]
    listed = addresses(replicas)

    code, err = Cli(tmp_path, capfd).write(
        table, [*changed, *added], "--op", "upsert", "--index", "record", "--index-service", listed
    )

    assert code == 0, err
    result = assert_readers_agree(table, DATA)
    names = {key: row["name"] for key, row in result.items()}
    assert names == {str(k): f"v2-{k}" if k % 3 == 0 or k >= 12 else f"v{k}" for k in range(40)}
    located = assert_index_agrees(table)
    keys = sorted(located)
    upsert = HoodieTable.open(table).timeline.completed(WRITE_ACTIONS)[-1].timestamp
    answered = IndexClient(listed, table).lookup(keys, as_of=upsert)
    assert {
        row["key"]: (row["partition"], row["file_id"]) for row in answered.to_pylist()
    } == located
    assert replicas[0].keys_served() + replicas[2].keys_served() > len(keys)
