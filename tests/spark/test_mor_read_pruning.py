"""Key reads of merge-on-read tables: with a record index a lookup (or a filter naming every
record key) merges only the slices of the file groups holding its keys, and within them
only the keys' rows; what it returns is what the whole snapshot holds for those keys."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

import tidemark.spark
from spark.morkit import COLUMNS, mor_frame, mor_options, our_rows
from tidemark.jobs.lookup import plan_lookup
from tidemark.storage.local import LocalStorage
from tidemark.table import HoodieTable

REGIONS = ["eu", "us", "ap", "sa"]


def _table(spark: SparkSession, uri: str) -> dict[str, tuple]:
    """A version 9 table with a record index, a file group per region, every group with
    log files (updates and a delete in each); its rows by id, as the writes left them."""
    model = {f"k{i:03}": (f"k{i:03}", f"n{i}", float(i), 1, REGIONS[i % 4]) for i in range(40)}
    options = mor_options(9, index="record")
    tidemark.spark.write(mor_frame(spark, list(model.values())), uri, "upsert", options=options)
    updates = [(f"k{i:03}", f"u{i}", i * 10.0, 2, REGIONS[i % 4]) for i in range(0, 40, 3)]
    tidemark.spark.write(mor_frame(spark, updates), uri, "upsert", options=options)
    model.update({row[0]: row for row in updates})
    deleted = [f"k{i:03}" for i in range(4, 8)]
    gone = mor_frame(spark, [model[key] for key in deleted])
    tidemark.spark.write(gone, uri, "delete", options=options)
    for key in deleted:
        del model[key]
    return model


def test_a_lookup_merges_only_the_groups_holding_its_keys(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = str(tmp_path / "t")
    model = _table(spark, uri)
    table = HoodieTable.open(uri)
    slices = {s.file_id: s for s in table.view().latest_file_slices() if s.logs}
    assert len(slices) == len(REGIONS)
    keys = ["k003", "k011", "k007"]  # in "sa": an updated key, a key kept, a deleted one
    plan = plan_lookup(table, keys).snapshot
    assert len(plan.slices) == 1 and plan.slices[0].partition_path.endswith("sa")
    assert plan.files == [] and plan.keys == frozenset(keys)

    opened: list[str] = []
    for name in ("read", "open_input"):
        monkeypatch.setattr(LocalStorage, name, _recording(getattr(LocalStorage, name), opened))
    found = tidemark.spark.lookup(spark, uri, keys, reader="driver").toArrow().to_pylist()
    data = [p for p in opened if not p.startswith(".hoodie/")]
    assert data and set(data) == set(plan.slices[0].paths)
    expected = {key: model[key] for key in keys if key in model}
    assert {r["id"]: tuple(r[c] for c in COLUMNS) for r in found} == expected


def _recording(method: Callable[..., Any], opened: list[str]) -> Callable[..., Any]:
    """``method`` of a storage, recording the path each call reads."""

    def record(self: LocalStorage, path: str, *args: Any, **kwargs: Any) -> Any:
        opened.append(path)
        return method(self, path, *args, **kwargs)

    return record


@pytest.mark.parametrize("reader", ["driver", "spark"])
def test_key_reads_of_merged_slices_are_the_snapshots_rows(
    spark: SparkSession, tmp_path: Path, reader: str
) -> None:
    uri = str(tmp_path / "t")
    model = _table(spark, uri)
    assert our_rows(spark, uri) == model
    keys = ["k000", "k001", "k005", "k012", "k039", "k999"]
    expected = {key: model[key] for key in keys if key in model}
    looked_up = tidemark.spark.lookup(spark, uri, keys, reader=reader).toArrow().to_pylist()
    assert {r["id"]: tuple(r[c] for c in COLUMNS) for r in looked_up} == expected
    filtered = tidemark.spark.read(spark, uri, filters=[("id", "in", keys)], reader=reader)
    rows = filtered.toArrow().to_pylist()
    assert {r["id"]: tuple(r[c] for c in COLUMNS) for r in rows} == expected
