"""hudi-rs reads log files this library writes into tables Apache Hudi wrote: an update and
a delete appended to a version-6 file slice (then undone by a rollback command block), and
to two version-9 file groups under a new deltacommit.

Only the log files are this library's; the timeline part is borrowed: each new deltacommit's
metadata is a copy of the fixture's own latest one (hudi-rs lists the files itself when there
is no metadata table and takes only the schema from that metadata)."""

from __future__ import annotations

import json
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

from table.log_testkit import log_paths
from table.table_testkit import hudi_rs_table
from tidemark.storage import open_storage
from tidemark.table.files.file_names import parse_base_file_name
from tidemark.table.logfiles.command_blocks import rollback_block
from tidemark.table.logfiles.data_blocks import avro_data_block, avro_records
from tidemark.table.logfiles.delete_blocks import DeleteRecord, delete_block
from tidemark.table.logfiles.file_names import (
    ROLLBACK_WRITE_TOKEN,
    log_file_instant,
    next_log_file_name,
    parse_log_file_name,
)
from tidemark.table.logfiles.framing import HeaderKey, LogBlock, read_blocks, write_log_file
from tidemark.table.timeline.instant import new_instant_time

RIDER_C = "e96c4396-3fad-413a-a942-4cb36106d721"
RIDER_E = "1dced545-862b-4ceb-8b43-d2a568f6616b"


def rows_by_key(root: Path) -> dict[str, dict[str, Any]]:
    return {row["_hoodie_record_key"]: row for row in hudi_rs_table(str(root)).to_pylist()}


def append_log(
    root: Path, partition: str, file_id: str, instant: str, token: str, blocks: list[LogBlock]
) -> str:
    """The next log file of ``file_id`` under ``instant``, holding ``blocks``."""
    existing = [path.name for path in (root / partition).iterdir()]
    name = next_log_file_name(existing, file_id, instant, token).name
    write_log_file(open_storage(str(root)), f"{partition}/{name}", blocks)
    return name


def test_hudi_rs_merges_a_version_6_log_this_library_appends(
    mor_tables: Path, tmp_path: Path
) -> None:
    root = tmp_path / "v6_trips_8i1u"
    shutil.copytree(mor_tables / "v6_trips_8i1u", root)
    [hudis_log] = log_paths(root)
    hudis = parse_log_file_name(hudis_log.name)
    [hudis_block] = read_blocks(hudis_log.read_bytes())
    schema = hudis_block.header[HeaderKey.SCHEMA]
    before = rows_by_key(root)

    instant = new_instant_time()
    rider_c = {
        **before[RIDER_C],
        "_hoodie_commit_time": instant,
        "_hoodie_commit_seqno": f"{instant}_0_1",
        "_hoodie_file_name": hudis.file_id,
        "fare": 99.5,
        "ts": before[RIDER_C]["ts"] + 1,
    }
    assert set(rider_c) == set(avro_records(hudis_block)[0])
    blocks = [
        avro_data_block(instant, schema, [rider_c]),
        delete_block(instant, [DeleteRecord(RIDER_E, "city=san_francisco")], schema),
    ]
    base_instant = log_file_instant(6, hudis.instant, instant)
    name = append_log(root, "city=san_francisco", hudis.file_id, base_instant, "0-40-99", blocks)
    assert parse_log_file_name(name).version == 2
    complete_v6_deltacommit(root, instant, f"city=san_francisco/{name}")

    after = rows_by_key(root)
    assert after[RIDER_C]["fare"] == 99.5
    assert RIDER_E not in after
    assert after == {
        key: row for key, row in {**before, RIDER_C: after[RIDER_C]}.items() if key != RIDER_E
    }

    rollback = [rollback_block(new_instant_time(), instant)]
    name = append_log(
        root, "city=san_francisco", hudis.file_id, base_instant, ROLLBACK_WRITE_TOKEN, rollback
    )
    assert name.endswith(".log.3_1-0-1")
    assert rows_by_key(root) == before


def complete_v6_deltacommit(root: Path, instant: str, log_path: str) -> None:
    """The fixture's deltacommit, its one write stat pointed at ``log_path``."""
    timeline = root / ".hoodie"
    [latest] = sorted(timeline.glob("*.deltacommit"))[-1:]
    metadata = json.loads(latest.read_text())
    [[stat]] = metadata["partitionToWriteStats"].values()
    log_name = log_path.rpartition("/")[2]
    stat.update(path=log_path, logFiles=[log_name], logVersion=2, numDeletes=1)
    (timeline / f"{instant}.deltacommit.requested").write_bytes(b"")
    (timeline / f"{instant}.deltacommit.inflight").write_bytes(b"")
    (timeline / f"{instant}.deltacommit").write_text(json.dumps(metadata, indent=2))


def test_hudi_rs_merges_version_9_logs_this_library_writes(
    mor_tables: Path, tmp_path: Path
) -> None:
    root = tmp_path / "v9_txns_simple_nometa"
    shutil.copytree(mor_tables / "v9_txns_simple_nometa", root)
    before = rows_by_key(root)
    hudis_log = log_paths(root)[0]
    schema = read_blocks(hudis_log.read_bytes())[0].header[HeaderKey.SCHEMA]

    requested = new_instant_time()
    updated, deleted = before["TXN-017"], before["TXN-013"]
    updated_group = parse_base_file_name(updated["_hoodie_file_name"]).file_id
    deleted_group = parse_base_file_name(deleted["_hoodie_file_name"]).file_id
    assert updated_group != deleted_group
    update = {
        **updated,
        "_hoodie_commit_time": requested,
        "_hoodie_commit_seqno": f"{requested}_0_1",
        "_hoodie_file_name": updated_group,
        "amount": Decimal("123.45"),
        "txn_ts": updated["txn_ts"] + 1,
    }
    instant = log_file_instant(9, None, requested)
    writes: list[tuple[str, LogBlock]] = [
        (updated_group, avro_data_block(requested, schema, [update])),
        (deleted_group, delete_block(requested, [DeleteRecord("TXN-013", "region=us")], schema)),
    ]
    for file_id, block in writes:
        name = append_log(root, "region=us", file_id, instant, "0-80-160", [block])
        assert parse_log_file_name(name).version == 1
    complete_v9_deltacommit(root, requested)

    after = rows_by_key(root)
    assert after["TXN-017"]["amount"] == Decimal("123.45")
    assert "TXN-013" not in after
    assert set(after) == set(before) - {"TXN-013"}
    unchanged = set(before) - {"TXN-013", "TXN-017"}
    assert {k: after[k] for k in unchanged} == {k: before[k] for k in unchanged}


def complete_v9_deltacommit(root: Path, requested: str) -> None:
    timeline = root / ".hoodie" / "timeline"
    latest = sorted(timeline.glob("*_*.deltacommit"))[-1]
    (timeline / f"{requested}.deltacommit.requested").write_bytes(b"")
    inflight = timeline / f"{latest.name.partition('_')[0]}.deltacommit.inflight"
    (timeline / f"{requested}.deltacommit.inflight").write_bytes(inflight.read_bytes())
    completed = new_instant_time(after=requested)
    (timeline / f"{requested}_{completed}.deltacommit").write_bytes(latest.read_bytes())
