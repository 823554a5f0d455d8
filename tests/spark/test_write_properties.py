"""Property: random upsert batches with awkward partition values, column names, composite
key values, nulls and CSV/JSON quoting, written through the CLI. After each write either
hudi-rs reads exactly a dict model (every key once), or the model predicted a refusal and
the write was refused in one line leaving the table byte-identical."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from spark.clikit import Cli, Row, refused_in_one_line, table_state
from spark.sparkkit import hudi_rs_table
from tidemark.table.records.keys import DEFAULT_PARTITION

GOOD_KEY_PARTS = ["a", "b c", "é", 'q"r', "", None]
BAD_KEY_PARTS = ["a,b", "x:y", "__null__", "__empty__"]
GOOD_PARTITIONS = ["x", "x y", "é", "a,b", "q:r", "100%", 'say "hi"', "2024/01/02", "x/z", "", None]
BAD_PARTITIONS = [".", "..", ".hoodie", ".hoodie/archived", "q/", "/q", "a\\b", "a\nb", "s" * 300]
GOOD_EXTRA = "note"
EXTRA_COLUMNS = [GOOD_EXTRA] * 10 + ["unit price", "a.b", "_tm_rank", "1st", "café"]
KEY = ("k1", "k2")

rows = st.fixed_dictionaries(
    {
        "k1": st.sampled_from(GOOD_KEY_PARTS * 4 + BAD_KEY_PARTS),
        "k2": st.integers(0, 2),
        "p": st.sampled_from(GOOD_PARTITIONS * 6 + BAD_PARTITIONS),
        "name": st.text(alphabet='ab ,"\n:é', max_size=5).map(lambda text: "v" + text),
        "ts": st.sampled_from([0, 1, 2] * 6 + [None]),
    }
)
batches = st.lists(
    st.tuples(st.sampled_from(["csv", "jsonl"]), st.lists(rows, min_size=1, max_size=3)),
    min_size=1,
    max_size=3,
)


def as_read(row: Row, fmt: str) -> Row:
    """CSV has no null: an empty field reads as null."""
    if fmt != "csv":
        return row
    return {name: None if value == "" else value for name, value in row.items()}


def partition_path(value: str | None) -> str:
    return DEFAULT_PARTITION if value in ("", None) else value


def _ancestors(path: str) -> set[str]:
    parts = path.split("/")
    return {"/".join(parts[:depth]) for depth in range(1, len(parts))}


class Model:
    """Key -> (partition value, name, ts) and every partition folder ever written."""

    def __init__(self) -> None:
        self.rows: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self.folders: set[str] = set()

    def refuses(self, batch: list[Row], extra: str) -> bool:
        if extra != GOOD_EXTRA or any(row["ts"] is None for row in batch):
            return True
        for row in batch:
            part = row["k1"]
            if part in BAD_KEY_PARTS:
                return True
        if any(row["p"] in BAD_PARTITIONS for row in batch):
            return True
        paths = {partition_path(row["p"]) for row in batch}
        everything = paths | self.folders
        return any(_ancestors(path) & everything for path in paths) or any(
            _ancestors(folder) & paths for folder in self.folders
        )

    def upsert(self, batch: list[Row]) -> None:
        """Largest ts per key wins, ties go to the later row; the table's row is replaced."""
        winners: dict[tuple[Any, ...], Row] = {}
        for row in batch:
            key = (row["k1"], row["k2"])
            if key not in winners or row["ts"] >= winners[key]["ts"]:
                winners[key] = row
        for key, row in winners.items():
            self.rows[key] = (row["p"], row["name"], row["ts"])
        self.folders |= {partition_path(row["p"]) for row in batch}


def read_back(uri: str) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    table = hudi_rs_table(uri)
    if table is None:
        return {}
    rows = table.to_pylist()
    keys = [row["_hoodie_record_key"] for row in rows]
    assert len(keys) == len(set(keys)), f"a key is read twice: {sorted(keys)}"
    return {(r["k1"], r["k2"]): (r["p"], r["name"], r["ts"]) for r in rows}


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=batches, extra=st.sampled_from(EXTRA_COLUMNS))
def test_writes_are_read_back_exactly_or_refused_cleanly(
    spark: SparkSession,
    capfd: pytest.CaptureFixture[str],
    steps: list[tuple[str, list[Row]]],
    extra: str,
) -> None:
    model = Model()
    with tempfile.TemporaryDirectory() as folder:
        cli = Cli(Path(folder), capfd)
        uri = str(Path(folder) / "table")
        layout = ("--key", ",".join(KEY), "--partition", "p", "--precombine", "ts")
        for fmt, generated in steps:
            batch = [row | {extra: 1} for row in generated]
            read = [as_read(row, fmt) for row in batch]
            before = table_state(uri)
            code, err = cli.write(uri, batch, "--op", "upsert", *layout, fmt=fmt)
            if model.refuses(read, extra):
                event("refused")
                refused_in_one_line(code, err)
                assert table_state(uri) == before
                continue
            event("written")
            assert code == 0, err
            model.upsert(read)
            assert read_back(uri) == model.rows
