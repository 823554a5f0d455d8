"""``tidemark.spark.read`` / ``lookup`` / ``register_view``: the snapshot hudi-rs reads, scanned
by Spark's own Parquet reader over the files the driver resolved (record index, partitions,
column statistics), on local storage and the local S3 server."""

from __future__ import annotations

import datetime
import shutil
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

import tidemark.spark
from spark.indexkit import indexed_table, rows
from spark.sparkkit import files_in_view, hudi_rs_table, local_frame, rows_by_key, snapshot
from tidemark.cli import main
from tidemark.errors import InvalidArgumentError, NotFoundError
from tidemark.index import pruning
from tidemark.index.pruning import plan_snapshot
from tidemark.index.record_index import RecordIndex
from tidemark.jobs import driver_read
from tidemark.jobs.filters import predicate_column
from tidemark.jobs.lookup import plan_lookup
from tidemark.jobs.read import glob_of_names, scan, spark_reaches
from tidemark.jobs.write import write
from tidemark.jobs.write_options import WriteOptions
from tidemark.storage import open_storage
from tidemark.storage.uri import hadoop_uri
from tidemark.table import HoodieTable
from tidemark.table.files import column_stats
from tidemark.table.metadata.actions import COMMIT
from tidemark.table.records.keys import META_COLUMNS
from tidemark.table.timeline.instant import new_instant_time

DATA_COLUMNS = ["id", "name", "part", "ts"]
MODEL = {k: (k, f"v{k}", "abc"[k % 3], 1) for k in range(12)}
"""The rows ``indexed_table`` writes, by key."""


def data_rows(frame: DataFrame) -> set[tuple[int, str, str, int]]:
    return {tuple(r) for r in frame.select(*DATA_COLUMNS).collect()}


def file_ids(frame: DataFrame, uri: str) -> set[str]:
    """The file groups Spark's scan of ``frame`` opens."""
    scanned = {path.rsplit("/", 1)[1] for path in frame.inputFiles()}
    files = HoodieTable.open(uri).view().latest_base_files()
    return {f.file_id for f in files if f.path.rsplit("/", 1)[1] in scanned}


def keyed_by_id(partition_field: str) -> WriteOptions:
    return WriteOptions(
        record_key_fields=["id"], partition_fields=[partition_field], precombine_field="ts"
    )


def scan_nodes(frame: DataFrame) -> str:
    return str(frame._jdf.queryExecution().executedPlan().toString())


def test_read_is_spark_parquet_scan_of_the_snapshot(spark: SparkSession, table_uri: str) -> None:
    indexed_table(spark, table_uri)
    first = HoodieTable.open(table_uri).timeline.last_completed()
    assert first is not None
    moves = local_frame(
        spark,
        [(1, "updated", "b", 2, "new"), (3, "moved", "b", 2, None)],
        "id int, name string, part string, ts long, note string",
    )  # 3 leaves partition a; the column note is added
    write(spark, moves, table_uri, "upsert")
    frame = tidemark.spark.read(spark, table_uri, reader="spark")
    plan = scan_nodes(frame)
    assert "FileScan parquet" in plan and "Python" not in plan and "Arrow" not in plan
    assert frame.columns == snapshot(table_uri).column_names
    assert frame.columns[: len(META_COLUMNS)] == list(META_COLUMNS)
    columns = [*META_COLUMNS, *DATA_COLUMNS, "note"]
    ours = rows_by_key(frame.toArrow(), columns)
    assert ours == rows_by_key(hudi_rs_table(table_uri), columns)
    assert ours["1"]["note"] == "new" and ours["5"]["note"] is None and len(ours) == 12
    assert ours["3"]["_hoodie_partition_path"] == "b"
    old = tidemark.spark.read(
        spark, table_uri, as_of=first.timestamp, where={"id": [1, 3]}, reader="spark"
    )
    assert data_rows(old) == {MODEL[1], MODEL[3]}
    assert "note" not in old.columns


READ_CASES = [
    ("n", "=", 3),
    ("n", "<", 2.5),
    ("n", ">=", 7.5),
    ("n", "in", [1, 4, 12]),
    ("n", "not in", [1, 4]),
    ("n", "!=", 5),
    ("n", "=", None),
    ("x", "<=", 3),
    ("x", ">", 4.5),
    ("x", "in", [1.5, 3]),
    ("f", "<", 0.5),
    ("f", ">", 0.30000001),
    ("s", "=", ""),
    ("s", ">", "s4"),
    ("s", "in", ["s1", "", "s9"]),
    ("s", "not in", ["s1"]),
    ("s", "is null", None),
    ("s", "is not null", None),
    ("d", ">=", "2026-11-05"),
    ("d", "=", datetime.date(2026, 11, 2)),
    ("d", "<", datetime.datetime(2026, 11, 3, 12)),
    ("at", ">", datetime.datetime(2026, 11, 5, 11, 30)),
    ("b", "=", True),
    ("part", "=", "q"),
]
"""A filter of each kind on columns of each type with nulls, values of the column's own kind
and of others (floats on an integer column, a datetime on a date column, a naive datetime on
a timestamp column): the driver must keep exactly the rows Spark's filter keeps of all the
rows Spark's scan reads."""


def test_small_reads_are_answered_in_the_driver_as_spark_answers_them(
    spark: SparkSession, table_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def value(k: int, made: object) -> object:
        return None if k % 4 == 3 else made

    def row(k: int) -> tuple:
        return (
            k,
            value(k, k % 9),
            value(k + 1, k * 0.75),
            value(k + 2, k / 10),
            value(k, "" if k % 5 == 0 else f"s{k}"),
            value(k + 3, datetime.date(2026, 11, 1 + k % 9)),
            datetime.datetime(2026, 11, 1 + k % 9, 12, tzinfo=datetime.UTC),
            value(k + 1, k % 2 == 0),
            "pq"[k % 2],
        )

    columns = "id int, n long, x double, f float, s string, d date, at timestamp, b boolean"
    frame = local_frame(spark, [row(k) for k in range(16)], f"{columns}, part string")
    options = WriteOptions(record_key_fields=["id"], partition_fields=["part"])
    write(spark, frame.repartition(2), table_uri, "bulk_insert", options)
    changed = local_frame(spark, [(*row(2), "changed")], f"{columns}, part string, name string")
    write(spark, changed, table_uri, "upsert")  # a column added: null in the other rows
    scanned = tidemark.spark.read(spark, table_uri, reader="spark")
    assert "FileScan parquet" in scan_nodes(scanned)
    everything = spark.createDataFrame(scanned.toArrow())  # Spark's filters, on Spark's rows
    for condition in READ_CASES:
        driver = tidemark.spark.read(spark, table_uri, filters=[condition])
        assert "LocalTableScan" in scan_nodes(driver), condition
        plan = plan_snapshot(HoodieTable.open(table_uri), [condition])
        (checked,) = plan.filters
        expected = everything.where(predicate_column(checked)).collect()
        assert {tuple(r) for r in driver.collect()} == {tuple(r) for r in expected}, condition
    both = [("n", ">", 1), ("s", "!=", "s6"), ("part", "=", "p")]
    picked, native = (
        tidemark.spark.read(spark, table_uri, filters=both, columns=["id", "x"], reader=reader)
        for reader in ("auto", "spark")
    )
    assert picked.columns == ["id", "x"]
    assert sorted(picked.collect()) == sorted(native.collect()) and picked.count() > 0
    point = tidemark.spark.read(spark, table_uri, where={"id": 2})
    assert [(r["id"], r["name"]) for r in point.collect()] == [(2, "changed")]
    assert "FileScan parquet" in scan_nodes(tidemark.spark.read(spark, table_uri, reader="scan"))
    one_row = point.toArrow().nbytes
    monkeypatch.setattr(driver_read, "DRIVER_MAX_ROW_BYTES", 4 * one_row)  # rows kept, not files
    assert "LocalTableScan" in scan_nodes(tidemark.spark.read(spark, table_uri, where={"id": 2}))
    over = tidemark.spark.read(spark, table_uri, filters=[("n", ">=", 0)])
    assert "FileScan parquet" in scan_nodes(over)
    assert {tuple(r) for r in over.collect()} == {
        tuple(r) for r in everything.where(sf.col("n") >= 0).collect()
    }
    monkeypatch.setattr(driver_read, "DRIVER_SMALL_READ_BYTES", 0)  # larger files: by key only
    assert "FileScan parquet" in scan_nodes(tidemark.spark.read(spark, table_uri, filters=both))
    assert "LocalTableScan" in scan_nodes(tidemark.spark.read(spark, table_uri, where={"id": 2}))
    monkeypatch.setattr(driver_read, "DRIVER_MAX_FILES", 1)
    assert "FileScan parquet" in scan_nodes(tidemark.spark.read(spark, table_uri))
    assert "LocalTableScan" in scan_nodes(tidemark.spark.read(spark, table_uri, reader="driver"))
    with pytest.raises(InvalidArgumentError) as bad:
        tidemark.spark.read(spark, table_uri, reader="executor")
    assert bad.value.field == "reader"


def spark_jobs(spark: SparkSession) -> list[int]:
    return list(spark.sparkContext.statusTracker().getJobIdsForGroup(None))


def test_scan_lists_partition_folders_without_a_listing_job(
    spark: SparkSession, table_uri: str
) -> None:
    """Spark gets the snapshot's partition folders and a filter naming its files: listed
    in the driver however many files (a list of more files than the threshold would be
    statted by a Spark job), older slices in the same folders left out."""
    indexed_table(spark, table_uri)
    write(spark, rows(spark, (0, "updated", "a", 2)), table_uri, "upsert")
    latest = files_in_view(table_uri)
    threshold = "spark.sql.sources.parallelPartitionDiscovery.threshold"
    spark.conf.set(threshold, "3")  # the three folders, fewer than the files
    try:
        assert len(latest) > 3
        before = spark_jobs(spark)
        frame = tidemark.spark.read(spark, table_uri, reader="spark")
        assert spark_jobs(spark) == before
    finally:
        spark.conf.unset(threshold)
    assert {path.split("/table/", 1)[1] for path in frame.inputFiles()} == latest
    columns = [*META_COLUMNS, *DATA_COLUMNS]
    assert rows_by_key(frame.toArrow(), columns) == rows_by_key(hudi_rs_table(table_uri), columns)


def test_scan_reads_exactly_the_planned_files(spark: SparkSession, table_uri: str) -> None:
    """A file in a listed folder named like a planned file of another folder (a copy the
    plan left out) is not read; a planned file deleted before the scan (or a read in the
    driver) is a NotFoundError naming it."""
    indexed_table(spark, table_uri)
    plan = plan_snapshot(HoodieTable.open(table_uri))
    copied = next(f for f in plan.files if f.partition_path == "a")
    stray = Path(table_uri, "b", copied.path.rsplit("/", 1)[1])
    shutil.copy(Path(table_uri, copied.path), stray)
    frame = scan(spark, plan)
    assert {path.split("/table/", 1)[1] for path in frame.inputFiles()} == {
        f.path for f in plan.files
    }
    assert frame.count() == len(MODEL)
    stray.unlink()
    Path(table_uri, copied.path).unlink()
    with pytest.raises(NotFoundError) as gone:
        scan(spark, plan)
    assert gone.value.field == copied.path
    with pytest.raises(NotFoundError) as gone:  # read in the driver
        driver_read.read_files(table_uri, plan.files, plan.schema, [])
    assert gone.value.field == "path" and copied.path in str(gone.value)


def test_glob_of_names_matches_exactly_the_names(spark: SparkSession) -> None:
    names = ["f1-0_1-0-1_20261127.parquet", "a,b{1}[x]*?^!\\.parquet"]
    accept = spark._jvm.org.apache.hadoop.fs.GlobFilter(glob_of_names(names)).accept  # type: ignore[union-attr]
    path = spark._jvm.org.apache.hadoop.fs.Path  # type: ignore[union-attr]
    assert all(accept(path(f"/t/{name}")) for name in names)
    others = ["f1-0_1-0-1_20261128.parquet", "a,b{1}[x]zz^!\\.parquet", "b{1}.parquet", "x"]
    assert not any(accept(path(f"/t/{name}")) for name in others)


def test_key_filters_and_lookup_open_only_the_files_holding_the_keys(
    spark: SparkSession, table_uri: str
) -> None:
    located = indexed_table(spark, table_uri)
    keys = [1, 4, 6]
    holders = {located[str(k)][1] for k in keys}
    assert len(files_in_view(table_uri)) > len(holders)
    by_filter = tidemark.spark.read(spark, table_uri, filters=[("id", "in", keys)], reader="spark")
    assert file_ids(by_filter, table_uri) == holders
    assert data_rows(by_filter) == {MODEL[k] for k in keys}
    listed = tidemark.spark.lookup(spark, table_uri, keys, reader="spark")
    assert file_ids(listed, table_uri) == holders
    assert data_rows(listed) == {MODEL[k] for k in keys}
    assert {
        f.file_id for f in plan_lookup(HoodieTable.open(table_uri), keys).snapshot.files
    } == holders
    frame_keys = local_frame(spark, [(4,), (7,), (7,), (99,)], "id int")
    for reader in ("spark", "driver"):
        joined = tidemark.spark.lookup(
            spark, table_uri, frame_keys, columns=DATA_COLUMNS, reader=reader
        )
        assert data_rows(joined) == {MODEL[4], MODEL[7]}
    joined = tidemark.spark.lookup(spark, table_uri, frame_keys, reader="spark")
    assert file_ids(joined, table_uri) == {located["4"][1], located["7"][1]}
    assert tidemark.spark.read(spark, table_uri, where={"id": 100}).count() == 0
    with pytest.raises(InvalidArgumentError) as refused:
        tidemark.spark.lookup(spark, table_uri, local_frame(spark, [(1,)], "key int"))
    assert refused.value.field == "keys"
    with pytest.raises(InvalidArgumentError) as typed:
        tidemark.spark.read(spark, table_uri, filters=[("id", "=", "abc")])
    assert typed.value.field == "id"
    with pytest.raises(InvalidArgumentError) as unknown:
        tidemark.spark.lookup(spark, table_uri, keys, reader="executor")
    assert unknown.value.field == "reader"
    with pytest.raises(InvalidArgumentError) as unfit:
        tidemark.spark.lookup(spark, table_uri, ["one"])
    assert unfit.value.field == "keys"


def lookup_rows(frame: DataFrame, columns: list[str]) -> dict[str, dict]:
    return rows_by_key(frame.toArrow(), columns)


def test_lookups_read_in_the_driver_what_the_spark_scan_reads(
    spark: SparkSession, table_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver's rows are the Spark scan's, meta columns as stored: keys upserted
    (one moved to another partition, a column added since), clustered into new files,
    missing, given as a DataFrame, at an older instant. ``auto`` reads in the driver
    (a local relation) within the bounds, with Spark's Parquet reader past them; a
    lookup sees a commit made after the last one in the same process."""
    indexed_table(spark, table_uri)
    first = HoodieTable.open(table_uri).timeline.last_completed()
    assert first is not None
    assert tidemark.spark.lookup(spark, table_uri, [20]).count() == 0
    moves = local_frame(
        spark,
        [(1, "updated", "b", 2, "new"), (3, "moved", "b", 2, None), (20, "new", "c", 2, "x")],
        "id int, name string, part string, ts long, note string",
    )
    write(spark, moves, table_uri, "upsert")
    columns = [*META_COLUMNS, *DATA_COLUMNS, "note"]
    keys = [1, 3, 4, 20, 99]

    def agree(as_of: str | None = None) -> dict[str, dict]:
        driver = tidemark.spark.lookup(spark, table_uri, keys, reader="driver", as_of=as_of)
        native = tidemark.spark.lookup(spark, table_uri, keys, reader="spark", as_of=as_of)
        assert "LocalTableScan" in scan_nodes(driver)
        assert "FileScan parquet" in scan_nodes(native)
        names = [c for c in columns if c in native.columns]
        rows = lookup_rows(native, names)
        assert lookup_rows(driver, names) == rows
        return rows

    latest = agree()
    assert set(latest) == {"1", "3", "4", "20"}
    assert latest["3"]["_hoodie_partition_path"] == "b" and latest["3"]["name"] == "moved"
    assert (latest["1"]["note"], latest["4"]["note"], latest["20"]["note"]) == ("new", None, "x")
    theirs = rows_by_key(hudi_rs_table(table_uri), columns)
    assert latest == {key: theirs[key] for key in latest}
    picked_columns = ["note", "name"]
    projected = {
        reader: tidemark.spark.lookup(spark, table_uri, keys, columns=picked_columns, reader=reader)
        for reader in ("driver", "spark")
    }
    picked = {reader: {tuple(r) for r in frame.collect()} for reader, frame in projected.items()}
    assert picked["driver"] == picked["spark"]
    assert picked["spark"] == {("new", "updated"), (None, "moved"), (None, "v4"), ("x", "new")}
    old = agree(as_of=first.timestamp)
    assert {k: r["name"] for k, r in old.items()} == {"1": "v1", "3": "v3", "4": "v4"}
    assert tidemark.spark.cluster_schedule(table_uri, sort_columns=["name"]) is not None
    tidemark.spark.cluster_run(spark, table_uri)
    clustered = agree()
    assert {k: r["name"] for k, r in clustered.items()} == {k: r["name"] for k, r in latest.items()}
    assert {r["_hoodie_file_name"] for r in clustered.values()}.isdisjoint(
        r["_hoodie_file_name"] for r in latest.values()
    )
    assert "LocalTableScan" in scan_nodes(tidemark.spark.lookup(spark, table_uri, keys))
    monkeypatch.setattr(driver_read, "DRIVER_MAX_FILES", 1)
    assert "FileScan parquet" in scan_nodes(tidemark.spark.lookup(spark, table_uri, keys))
    monkeypatch.setattr(driver_read, "DRIVER_MAX_FILES", 100)
    monkeypatch.setattr(driver_read, "DRIVER_MAX_BYTES", 1)
    assert "FileScan parquet" in scan_nodes(tidemark.spark.lookup(spark, table_uri, keys))


def test_composite_key_lookups_agree_with_timestamps_and_nulls(
    spark: SparkSession, table_uri: str
) -> None:
    moments = [datetime.datetime(2026, 11, d, 12, tzinfo=datetime.UTC) for d in (1, 2, 3)]
    frame = local_frame(
        spark,
        [
            (k % 3, f"n{k}", moments[k % 3], None if k % 2 else k * 1.5, "ab"[k % 2])
            for k in range(10)
        ],
        "id int, name string, at timestamp, amount double, part string",
    ).repartition(1)
    options = WriteOptions(record_key_fields=["id", "name"], partition_fields=["part"])
    write(spark, frame, table_uri, "bulk_insert", options)
    tidemark.spark.index_build(spark, table_uri, shards=2)
    keys = [(0, "n0"), (1, "n1"), (1, "n5"), (2, "n5"), (7, "n7")]  # (1, "n5"): no such pair
    columns = [*META_COLUMNS, "id", "name", "at", "amount", "part"]
    driver = tidemark.spark.lookup(spark, table_uri, keys, reader="driver")
    native = tidemark.spark.lookup(spark, table_uri, keys, reader="spark")
    rows = lookup_rows(native, columns)
    assert lookup_rows(driver, columns) == rows
    assert set(rows) == {"id:0,name:n0", "id:1,name:n1", "id:2,name:n5"}
    assert rows["id:1,name:n1"]["amount"] is None and rows["id:1,name:n1"]["at"] == moments[1]
    frame_keys = local_frame(spark, keys, "id long, name string")
    assert lookup_rows(tidemark.spark.lookup(spark, table_uri, frame_keys), columns) == rows
    with pytest.raises(InvalidArgumentError) as arity:
        tidemark.spark.lookup(spark, table_uri, [(0, "n0", "extra")])
    assert arity.value.field == "keys" and "(id, name)" in str(arity.value)


def test_date_partitions_are_listed_only_when_asked(spark: SparkSession, table_uri: str) -> None:
    days = [datetime.date(2026, 11, d) for d in (1, 2, 3)]
    frame = local_frame(
        spark, [(k, days[k % 3], k) for k in range(9)], "id long, day date, ts long"
    ).repartition(1)
    write(spark, frame, table_uri, "bulk_insert", keyed_by_id("day"))
    one = plan_snapshot(HoodieTable.open(table_uri), [("day", "=", days[1])])
    assert one.pruned["listed"] == 1 and {f.partition_path for f in one.files} == {"2026-11-02"}
    later = plan_snapshot(HoodieTable.open(table_uri), [("day", ">=", days[1])])
    assert later.pruned["listed"] == 3 and later.pruned["partitions"] == 2
    read = tidemark.spark.read(spark, table_uri, filters=[("day", "in", days[1:])], reader="spark")
    theirs = hudi_rs_table(table_uri)
    assert theirs is not None
    expected = {r["id"] for r in theirs.to_pylist() if r["day"] in days[1:]}
    assert {r["id"] for r in read.collect()} == expected and len(expected) == 6
    assert len(read.inputFiles()) == 2


def test_column_statistics_skip_files(spark: SparkSession, table_uri: str) -> None:
    """ids 0-3 in partition a, 4-7 in b, 8-11 in c (one file each); one null name in c."""
    frame = local_frame(
        spark,
        [(k, None if k == 9 else f"v{k}", "abc"[k // 4], k) for k in range(12)],
        "id int, name string, part string, ts long",
    ).repartition(1)
    created = write(spark, frame, table_uri, "bulk_insert", keyed_by_id("part"))
    storage = open_storage(table_uri)
    assert storage.exists(column_stats.stats_path(created.instant))
    cases = {
        ("ts", ">", 8): {"c"},
        ("ts", "in", (1, 5)): {"a", "b"},
        ("ts", "<=", 3): {"a"},
        ("ts", "=", 100): set(),
        ("name", "is null", None): {"c"},
        ("name", "is not null", None): {"a", "b", "c"},
        ("name", "!=", "v1"): {"a", "b", "c"},
    }
    theirs = hudi_rs_table(table_uri)
    assert theirs is not None
    for condition, partitions in cases.items():
        plan = plan_snapshot(HoodieTable.open(table_uri), [condition])
        assert {f.partition_path for f in plan.files} == partitions, condition
        read = tidemark.spark.read(spark, table_uri, filters=[condition])
        assert {r["id"] for r in read.collect()} == _matching(theirs.to_pylist(), condition)
    storage.delete_prefix(column_stats.STATS_DIR)
    assert (
        len(plan_snapshot(HoodieTable.open(table_uri), [("ts", ">", 8)]).files) == 3
    )  # no stats: no skipping
    assert main(["stats", "rebuild", "--table", table_uri]) == 0
    assert len(plan_snapshot(HoodieTable.open(table_uri), [("ts", ">", 8)]).files) == 1
    assert tidemark.spark.stats_rebuild(table_uri) == 3
    table = HoodieTable.open(table_uri)
    failed = new_instant_time(after=table.timeline.latest_timestamp())
    storage.write(column_stats.stats_path(failed), b"stats of a write that failed")
    table.timeline.create_requested(failed, COMMIT)
    tidemark.spark.rollback(table_uri, failed)
    assert not storage.exists(column_stats.stats_path(failed))


def _matching(rows: list[dict], condition: tuple) -> set[int]:
    column, op, value = condition
    test = {
        ">": lambda v: v is not None and v > value,
        "<=": lambda v: v is not None and v <= value,
        "=": lambda v: v == value,
        "in": lambda v: v in value,
        "!=": lambda v: v is not None and v != value,
        "is null": lambda v: v is None,
        "is not null": lambda v: v is not None,
    }[op]
    return {r["id"] for r in rows if test(r[column])}


def test_register_view_answers_sql_and_refreshes_on_demand(
    spark: SparkSession, table_uri: str
) -> None:
    indexed_table(spark, table_uri)
    tidemark.spark.register_view(spark, "native_events", table_uri)
    query = "SELECT id, name, part, ts FROM native_events"
    assert {tuple(r) for r in spark.sql(f"{query} WHERE id IN (2, 5)").collect()} == {
        MODEL[2],
        MODEL[5],
    }
    assert spark.sql(query).count() == 12
    assert "FileScan parquet" in scan_nodes(spark.sql(f"{query} WHERE part = 'b'"))
    write(spark, rows(spark, (20, "new", "c", 2)), table_uri, "upsert")
    assert spark.sql(query).count() == 12  # the view is the snapshot it was made of
    tidemark.spark.register_view(spark, "native_events", table_uri)
    assert spark.sql(query).count() == 13


def test_key_reads_compact_a_piled_up_index(
    spark: SparkSession, table_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    indexed_table(spark, table_uri)
    inserts = [(k, "new", "abc"[k % 3], 2) for k in range(20, 32)]  # new keys: index deltas
    write(spark, rows(spark, *inserts), table_uri, "upsert")
    index = RecordIndex.open(open_storage(table_uri))
    assert index.max_deltas() == 1
    folded = tidemark.spark.index_compact(table_uri)
    index.refresh()
    assert folded.deltas_folded >= 1 and index.max_deltas() == 0
    write(spark, rows(spark, (40, "new", "c", 2)), table_uri, "upsert")
    index.refresh()
    assert index.max_deltas() == 1
    monkeypatch.setattr(pruning, "READ_COMPACT_AFTER_DELTAS", 1)
    assert len(plan_snapshot(HoodieTable.open(table_uri), [("id", "=", 40)]).files) == 1
    index.refresh()
    assert index.max_deltas() == 0


def test_s3_tables_resolve_and_read_without_s3a(spark: SparkSession, s3_bucket: str) -> None:
    """This session has no hadoop-aws: the files are resolved on S3 and read through
    tidemark.storage; with it, Spark reads the same files as s3a:// paths."""
    located = indexed_table(spark, s3_bucket)
    assert hadoop_uri(s3_bucket).startswith("s3a://")
    assert not spark_reaches(spark, s3_bucket)
    plan = plan_snapshot(HoodieTable.open(s3_bucket), [("id", "=", 4)])
    assert [f.file_id for f in plan.files] == [located["4"][1]]
    frame = tidemark.spark.read(spark, s3_bucket, reader="storage")
    columns = [*META_COLUMNS, *DATA_COLUMNS]
    assert rows_by_key(frame.toArrow(), columns) == rows_by_key(hudi_rs_table(s3_bucket), columns)
    in_driver = tidemark.spark.read(spark, s3_bucket, where={"part": "b"})
    assert "LocalTableScan" in scan_nodes(in_driver)
    assert rows_by_key(in_driver.toArrow(), columns) == rows_by_key(
        frame.where(sf.col("part") == "b").toArrow(), columns
    )
    assert data_rows(tidemark.spark.lookup(spark, s3_bucket, [4, 5])) == {MODEL[4], MODEL[5]}
    driver = tidemark.spark.lookup(spark, s3_bucket, [4, 5, 99], reader="driver")
    tasks = tidemark.spark.lookup(spark, s3_bucket, [4, 5, 99], reader="storage")
    assert "LocalTableScan" in scan_nodes(driver)
    assert lookup_rows(driver, columns) == lookup_rows(tasks, columns)
    assert set(lookup_rows(driver, columns)) == {"4", "5"}
    in_b = {r for r in MODEL.values() if r[2] == "b"}
    assert data_rows(frame.where(sf.col("part") == "b")) == in_b
