"""Merge-on-read commit metadata: the delta write stats of Hudi's ``deltacommit`` files
(version 6 JSON, version 8 Avro, as Hudi wrote them in tests/fixtures/hudi-mor) parsed, and
written back so Hudi's field names and values survive."""

from __future__ import annotations

import io
from pathlib import Path

import fastavro

from tidemark.table.metadata.actions import DELTA_COMMIT
from tidemark.table.metadata.commit import CommitMetadata, WriteStat
from tidemark.table.metadata.commit_avro import (
    commit_metadata_from_avro,
    commit_metadata_to_avro,
)

V6_UPDATE = Path("v6_trips_8i1u", ".hoodie", "20250331030645735.deltacommit")
V8_UPDATE = Path(
    "v8_trips_8i3u1d", ".hoodie", "timeline", "20251220210130911_20251220210131755.deltacommit"
)


def _only_stat(metadata: CommitMetadata) -> WriteStat:
    (stat,) = metadata.write_stats
    return stat


def test_a_version_6_deltacommit_names_the_log_it_appended(mor_tables: Path) -> None:
    stat = _only_stat(CommitMetadata.from_json((mor_tables / V6_UPDATE).read_bytes()))
    assert stat.is_delta
    assert stat.log_version == 1 and stat.log_offset == 0
    assert (
        stat.base_file == "d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0_0-13-60_20250331030642808.parquet"
    )
    assert stat.log_files == (
        ".d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0_20250331030642808.log.1_0-26-85",
    )
    assert stat.num_update_writes == 1


def test_a_version_8_deltacommit_names_its_own_log_and_no_base_file(mor_tables: Path) -> None:
    stat = _only_stat(commit_metadata_from_avro((mor_tables / V8_UPDATE).read_bytes()))
    assert stat.is_delta and stat.base_file == ""
    assert stat.log_files == (
        ".8aa68f7e-afd6-4c94-b86c-8a886552e08d-0_20251220210130911.log.1_0-1139-3316",
    )


def test_delta_stats_survive_json_and_avro(mor_tables: Path) -> None:
    metadata = CommitMetadata.from_json((mor_tables / V6_UPDATE).read_bytes())
    assert CommitMetadata.from_json(metadata.to_json()) == metadata
    written = commit_metadata_to_avro(metadata, DELTA_COMMIT)
    assert commit_metadata_from_avro(written) == metadata
    (record,) = fastavro.reader(io.BytesIO(written))
    assert isinstance(record, dict)
    (raw,) = record["partitionToWriteStats"]["city=san_francisco"]
    assert raw["logFiles"] == list(_only_stat(metadata).log_files or ())
    assert raw["logVersion"] == 1


def test_a_base_file_stat_carries_no_log_fields() -> None:
    stat = WriteStat("f1", "p/f1_0-1-2_1.parquet", "null", 1, 0, 0, 1, 10, 10, "p")
    assert not stat.is_delta
    assert "logFiles" not in stat.to_json_dict()
    assert WriteStat.from_json_dict(stat.to_json_dict()) == stat
