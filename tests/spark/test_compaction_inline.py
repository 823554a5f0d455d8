"""Inline compaction (``WriteOptions(compact_after=N)``, ``tidemark write --compact-after``),
as Hudi's ``hoodie.compact.inline``: after the commit of the write that brings the
deltacommits since the last compaction to N, a compaction is planned and run in the same
Spark session; hudi-rs and ``tidemark.spark.read`` read the model, the timeline shows the
compaction's commit. Pending compactions run first; copy-on-write tables and N < 1 are
refused naming the field; a stream writer compacts the same way."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import tidemark.spark
from spark.clikit import Cli, refused_in_one_line, table_state
from spark.morkit import hudi_rs_rows, mor_frame, mor_options, our_rows
from tidemark.errors import InvalidArgumentError
from tidemark.table import HoodieTable
from tidemark.table.metadata.actions import COMMIT, COMPACTION, DELTA_COMMIT
from tidemark.table.metadata.commit import COMPACT_OPERATION
from tidemark.table.plans.compaction import pending_compactions
from tidemark.table.timeline.instant import State

Model = dict[str, tuple]


def _rows(batch: int, keys: Iterable[int]) -> list[tuple]:
    return [(f"k{i:03}", f"b{batch}", float(i), batch, "eu" if i % 2 else "us") for i in keys]


def _assert_read(spark: SparkSession, uri: str, model: Model) -> None:
    assert hudi_rs_rows(uri) == model
    assert our_rows(spark, uri) == model


def _compaction_commits(uri: str) -> list[str]:
    timeline = HoodieTable.open(uri).timeline
    done = timeline.completed(frozenset({COMMIT}))
    assert all(timeline.requested(i).action == COMPACTION for i in done)
    assert all(timeline.read_metadata(i).operation_type == COMPACT_OPERATION for i in done)
    return [i.timestamp for i in done]


def _slices_with_logs(uri: str) -> int:
    return sum(1 for s in HoodieTable.open(uri).view().latest_file_slices() if s.logs)


@pytest.mark.parametrize("version", [6, 9])
def test_the_write_that_reaches_n_deltacommits_compacts_them(
    spark: SparkSession, tmp_path: Path, version: int
) -> None:
    uri = str(tmp_path / "t")
    options = mor_options(version, compact_after=2)
    model: Model = {}
    first = _rows(1, range(30))
    result = tidemark.spark.write(mor_frame(spark, first), uri, "upsert", options=options)
    model.update({row[0]: row for row in first})
    assert result.compactions == []  # 1 deltacommit < 2
    updates = _rows(2, range(0, 30, 3))  # both partitions
    result = tidemark.spark.write(mor_frame(spark, updates), uri, "upsert", options=options)
    model.update({row[0]: row for row in updates})

    [compacted] = result.compactions
    [instant] = _compaction_commits(uri)
    assert compacted.instant == instant > result.instant
    assert compacted.rows == len(model)
    assert "compaction" in result.stage_seconds
    assert _slices_with_logs(uri) == 0
    _assert_read(spark, uri, model)

    later = _rows(3, range(1, 30, 5))
    result = tidemark.spark.write(mor_frame(spark, later), uri, "upsert", options=options)
    model.update({row[0]: row for row in later})
    assert result.compactions == []  # 1 deltacommit since the compaction
    assert _slices_with_logs(uri) > 0
    _assert_read(spark, uri, model)
    result = tidemark.spark.write(
        mor_frame(spark, [model.pop("k007")]), uri, "delete", options=options
    )
    assert [c.instant for c in result.compactions] == _compaction_commits(uri)[1:]
    assert _slices_with_logs(uri) == 0
    _assert_read(spark, uri, model)


def test_a_bounded_inline_compaction_takes_the_largest_logs_first(
    spark: SparkSession, tmp_path: Path
) -> None:
    """``compaction_target_io_mb`` (Hudi's ``hoodie.compaction.target.io``) bounds each
    inline plan: with room for one operation, the group with the larger logs is compacted
    and the other keeps its logs for the next plan."""
    uri = str(tmp_path / "t")
    options = mor_options(8, compact_after=2, compaction_target_io_mb=1e-6)
    model: Model = {}
    for batch, keys in ((1, range(30)), (2, [*range(1, 30, 2), 0])):  # eu: 15 keys, us: 1
        rows = _rows(batch, keys)
        result = tidemark.spark.write(mor_frame(spark, rows), uri, "upsert", options=options)
        model.update({row[0]: row for row in rows})

    [compacted] = result.compactions
    assert compacted.file_groups == 1
    [left] = [s for s in HoodieTable.open(uri).view().latest_file_slices() if s.logs]
    assert left.partition_path == "us"
    _assert_read(spark, uri, model)


def test_a_pending_compaction_runs_first(spark: SparkSession, tmp_path: Path) -> None:
    """As Hudi's ``runAnyPendingCompactions``: a plan scheduled apart is run by the next
    write with ``compact_after``, though that write's own count is not reached."""
    uri = str(tmp_path / "t")
    rows = _rows(1, range(20))
    tidemark.spark.write(mor_frame(spark, rows), uri, "upsert", options=mor_options(8))
    updates = _rows(2, range(0, 20, 3))
    tidemark.spark.write(mor_frame(spark, updates), uri, "upsert", options=mor_options(8))
    pending = tidemark.spark.compaction_schedule(spark, uri, max_delta_commits=2)
    assert pending is not None
    model = {row[0]: row for row in [*rows, *updates]}
    more = _rows(3, range(1, 20, 6))
    model.update({row[0]: row for row in more})
    options = mor_options(8, compact_after=10)
    result = tidemark.spark.write(mor_frame(spark, more), uri, "upsert", options=options)
    assert [c.instant for c in result.compactions] == [pending] == _compaction_commits(uri)
    _assert_read(spark, uri, model)


def test_inline_compaction_is_refused_on_copy_on_write_tables(
    spark: SparkSession, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    uri = str(tmp_path / "t")
    rows = mor_frame(spark, _rows(1, range(5)))
    cow = mor_options(6, table_type=None, compact_after=3)  # a new table: copy-on-write
    with pytest.raises(InvalidArgumentError, match="MERGE_ON_READ") as refused:
        tidemark.spark.write(rows, uri, "upsert", options=cow)
    assert refused.value.field == "compact_after"
    assert not Path(uri).exists()
    tidemark.spark.write(rows, uri, "upsert", options=replace(cow, compact_after=None))
    before = table_state(uri)
    with pytest.raises(InvalidArgumentError, match="COPY_ON_WRITE") as refused:
        tidemark.spark.write(rows, uri, "upsert", options=replace(cow, record_key_fields=()))
    assert refused.value.field == "compact_after"
    assert table_state(uri) == before

    cli = Cli(tmp_path, capfd)
    for given in ("0", "-2"):
        line = refused_in_one_line(
            *cli.write(uri, [{"id": "k"}], "--op", "upsert", "--compact-after", given)
        )
        assert "compact_after" in line and f"got {given}" in line
    assert table_state(uri) == before


def test_a_stream_writer_compacts_inline(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    options = mor_options(8, compact_after=3)
    model: Model = {}
    with tidemark.spark.stream_writer(uri, query_id="q", options=options) as writer:
        for batch in range(4):
            rows = _rows(batch, range(batch, 24, 3 if batch else 1))
            writer(mor_frame(spark, rows), batch)
            model.update({row[0]: row for row in rows})
        assert [bool(r.compactions) for r in writer.results] == [False, False, True, False]
    timeline = HoodieTable.open(uri).timeline
    [instant] = _compaction_commits(uri)
    deltas = [i.timestamp for i in timeline.completed(frozenset({DELTA_COMMIT}))]
    assert sum(1 for d in deltas if d < instant) == 3
    assert timeline.find(instant).state is State.COMPLETED
    _assert_read(spark, uri, model)


def test_tidemark_write_compact_after(
    spark: SparkSession, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The first write makes base files only (nothing to compact); the update's log is
    compacted by the write that made it."""
    uri = str(tmp_path / "t")
    cli = Cli(tmp_path, capfd)
    layout = ["--key", "id", "--partition", "region", "--precombine", "ts"]
    rows = [{"id": f"k{i}", "name": "a", "score": 1.0, "ts": 1, "region": "eu"} for i in range(4)]
    assert cli.write(uri, rows, "--op", "upsert", *layout, "--table-type", "MERGE_ON_READ")[0] == 0
    rows[1] |= {"name": "b", "ts": 2}
    source = tmp_path / "update.jsonl"
    source.write_text(json.dumps(rows[1]) + "\n")
    code, out = cli.output(
        "write", "--table", uri, "--input", str(source), "--op", "upsert", "--markers",
        "direct", "--master", "local[2]", "--compact-after", "1", "--json",
    )  # fmt: skip
    assert code == 0
    result = json.loads(out.strip().splitlines()[-1])
    [compaction] = result["compactions"]
    assert (compaction["file_groups"], compaction["rows"]) == (1, 4)
    assert _compaction_commits(uri) == [compaction["instant"]]
    assert _slices_with_logs(uri) == 0
    assert hudi_rs_rows(uri) == {r["id"]: tuple(r.values()) for r in rows}


def test_a_failed_inline_compaction_leaves_the_write_committed(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A pending plan that cannot run (a log file it names is gone): the write that runs
    it inline still returns its committed instant, the failure in ``compaction_error``,
    the plan left pending."""
    uri = str(tmp_path / "t")
    for batch, keys in ((1, range(10)), (2, range(0, 10, 2))):
        rows = mor_frame(spark, _rows(batch, keys))
        tidemark.spark.write(rows, uri, "upsert", options=mor_options(8))
    pending = tidemark.spark.compaction_schedule(spark, uri, max_delta_commits=2)
    assert pending is not None
    [plan] = pending_compactions(HoodieTable.open(uri))
    Path(uri, plan.plan.operations[0].log_paths[0]).unlink()
    options = mor_options(8, compact_after=5)
    result = tidemark.spark.write(
        mor_frame(spark, _rows(3, range(1, 10, 4))), uri, "upsert", options=options
    )
    assert HoodieTable.open(uri).timeline.is_completed(result.instant)
    assert result.compactions == []
    assert result.compaction_error is not None and pending in result.compaction_error
    assert [p.timestamp for p in pending_compactions(HoodieTable.open(uri))] == [pending]
