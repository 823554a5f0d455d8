"""Model-based: random batches of writes against a dict model, checked after every commit
by our reader and by hudi-rs (rows and meta columns), on a table created at a drawn table
version (6, 8 or 9) and type (copy-on-write, or merge-on-read: updates and deletes as log
files); the versions and types share the examples rather than multiply them."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from spark.sparkkit import (
    SCHEMA,
    TABLE_VERSIONS,
    assert_readers_agree,
    data_files,
    files_in_view,
    local_frame,
)
from tidemark.jobs.write import write
from tidemark.jobs.write_options import WriteOptions
from tidemark.table.properties.config import TABLE_TYPES

Row = tuple[int, str, str, int]
OPERATIONS = ("upsert", "delete", "insert", "insert_overwrite", "bulk_insert")

rows = st.tuples(
    st.integers(0, 11), st.sampled_from("abcd"), st.sampled_from("xyz"), st.integers(0, 3)
)
steps = st.lists(
    st.tuples(st.sampled_from(OPERATIONS), st.lists(rows, min_size=1, max_size=6)),
    min_size=1,
    max_size=4,
)


class Model:
    """Record key -> (name, partition, ts, commit time of the row's last write)."""

    def __init__(self) -> None:
        self.rows: dict[str, tuple[str, str, int, str]] = {}

    def batch(self, operation: str, batch: list[Row]) -> list[Row]:
        """The rows the test sends: Hudi would duplicate keys that insert, bulk_insert and
        insert_overwrite do not look up, so those batches avoid such keys."""
        if operation in ("insert", "bulk_insert"):
            fresh = [r for r in batch if str(r[0]) not in self.rows]
            return list({r[0]: r for r in fresh}.values()) if operation == "bulk_insert" else fresh
        if operation == "insert_overwrite":
            return self._staying_in_one_partition(batch)
        return batch

    def _staying_in_one_partition(self, batch: list[Row]) -> list[Row]:
        """Rows whose key stays in its current partition (new keys: their first one), as
        overwriting a partition never removes a key from another partition."""
        home = {key: row[1] for key, row in self.rows.items()}
        return [r for r in batch if home.setdefault(str(r[0]), r[2]) == r[2]]

    def apply(self, operation: str, batch: list[Row], instant: str) -> None:
        if operation == "delete":
            for row in batch:
                self.rows.pop(str(row[0]), None)
            return
        winners: dict[str, Row] = {}
        for row in batch:
            key = str(row[0])
            if key not in winners or row[3] >= winners[key][3]:
                winners[key] = row
        if operation == "insert_overwrite":
            partitions = {r[2] for r in batch}
            self.rows = {k: v for k, v in self.rows.items() if v[1] not in partitions}
        for key, (_, name, part, ts) in winners.items():
            self.rows[key] = (name, part, ts, instant)


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    steps=steps,
    version=st.sampled_from(TABLE_VERSIONS),
    table_type=st.sampled_from(TABLE_TYPES),
)
def test_writes_match_the_model(
    spark: SparkSession, steps: list[tuple[str, list[Row]]], version: int, table_type: str
) -> None:
    model = Model()
    with tempfile.TemporaryDirectory() as directory:
        uri = str(Path(directory) / "table")
        for operation, generated in steps:
            batch = model.batch(operation, generated)
            if not batch:
                continue
            result = write(
                spark,
                local_frame(spark, batch, SCHEMA),
                uri,
                operation,
                WriteOptions(
                    record_key_fields=["id"],
                    partition_fields=["part"],
                    precombine_field="ts",
                    table_version=version,
                    table_type=table_type,
                ),
            )
            model.apply(operation, batch, result.instant)
            seen = assert_readers_agree(uri, ["id", "name", "part", "ts"])
            assert {
                key: (r["name"], r["part"], r["ts"], r["_hoodie_commit_time"])
                for key, r in seen.items()
            } == model.rows
            assert files_in_view(uri) <= data_files(uri)
