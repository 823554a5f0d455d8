"""Log file names as Hudi writes them, checked against the names in the tables it wrote."""

from __future__ import annotations

from pathlib import Path

import pytest

from table.log_testkit import MOR_NAMES, log_paths, table_blocks
from tidemark.errors import InvalidArgumentError
from tidemark.table.files.file_names import is_base_file_name, parse_base_file_name
from tidemark.table.logfiles.file_names import (
    ROLLBACK_WRITE_TOKEN,
    is_log_file_name,
    log_file_instant,
    log_file_name,
    next_log_file_name,
    parse_log_file_name,
)

ROLLBACK_TABLE = "v6_nonpartitioned_rollback"
FILE_ID = "0712b9f9-d2d5-4cae-bcf4-8fd7146af503-0"
BASE_INSTANT = "20250126040823628"


@pytest.mark.parametrize("name", MOR_NAMES)
def test_every_log_file_name_hudi_wrote_parses_back_to_itself(mor_tables: Path, name: str) -> None:
    paths = log_paths(mor_tables / name, metadata_table=True)
    assert paths
    for path in paths:
        parsed = parse_log_file_name(path.name)
        assert parsed.name == path.name
        assert log_file_name(parsed.file_id, parsed.instant, parsed.version, parsed.write_token)


def test_the_parts_of_a_name() -> None:
    parsed = parse_log_file_name(
        ".d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0_20250331030642808.log.12_0-26-85"
    )
    assert parsed.file_id == "d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0"
    assert parsed.instant == "20250331030642808"
    assert parsed.version == 12
    assert parsed.write_token == "0-26-85"


@pytest.mark.parametrize(
    "name",
    [
        "d0304c53-0_20250331030642808.log.1_0-26-85",  # no leading dot
        ".d0304c53-0_20250331030642808.log.0_0-26-85",  # versions start at 1
        ".d0304c53-0_20250331030642808.log.1_0-26",  # a token has three parts
        ".d0304c53-0_2025033103064280.log.1_0-26-85",  # 16 digits
        ".d0304c53-0_20250331030642808.log.1_0-26-85.cdc",
        "d0304c53-0_0-13-60_20250331030642808.parquet",
    ],
)
def test_what_is_not_a_log_file_name(name: str) -> None:
    assert not is_log_file_name(name)
    with pytest.raises(InvalidArgumentError) as raised:
        parse_log_file_name(name)
    assert raised.value.field == "file_name"


@pytest.mark.parametrize(
    ("parts", "field"),
    [
        (("a_b", BASE_INSTANT, 1, "0-1-2"), "file_id"),
        ((FILE_ID, "2025", 1, "0-1-2"), "instant"),
        ((FILE_ID, BASE_INSTANT, 0, "0-1-2"), "version"),
        ((FILE_ID, BASE_INSTANT, 1, "0_1_2"), "write_token"),
    ],
)
def test_a_name_is_built_from_checked_parts(parts: tuple[str, str, int, str], field: str) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        log_file_name(*parts)
    assert raised.value.field == field


def test_versions_and_tokens_follow_hudis_on_version_6(mor_tables: Path) -> None:
    """The rollback table: Hudi appended version 1, rolled it back with version 2 under the
    unknown token, then the next deltacommit wrote version 3 under its own token."""
    names = [path.name for path in log_paths(mor_tables / ROLLBACK_TABLE)]
    first, rollback, third = names
    assert next_log_file_name([], FILE_ID, BASE_INSTANT, "0-33-43").name == first
    assert next_log_file_name([first], FILE_ID, BASE_INSTANT, ROLLBACK_WRITE_TOKEN).name == rollback
    assert next_log_file_name([first, rollback], FILE_ID, BASE_INSTANT, "0-13-9").name == third


def test_the_next_version_counts_only_the_same_file_group_and_instant() -> None:
    existing = [
        f"part/.{FILE_ID}_{BASE_INSTANT}.log.9_0-1-1",
        f".other-0_{BASE_INSTANT}.log.20_0-1-1",
        f".{FILE_ID}_20250126040823629.log.30_0-1-1",
        f"{FILE_ID}_0-13-60_{BASE_INSTANT}.parquet",
    ]
    assert next_log_file_name(existing, FILE_ID, BASE_INSTANT, "2-3-4").version == 10


def test_log_files_order_by_instant_then_version_as_numbers() -> None:
    names = [
        f".{FILE_ID}_{BASE_INSTANT}.log.10_0-1-1",
        f".{FILE_ID}_{BASE_INSTANT}.log.2_0-1-1",
        f".{FILE_ID}_20250101000000000.log.11_0-1-1",
    ]
    ordered = sorted(map(parse_log_file_name, names), key=lambda name: name.order_key)
    assert [name.version for name in ordered] == [11, 2, 10]


def test_version_6_names_logs_by_the_slice_base_instant(mor_tables: Path) -> None:
    """The file name carries the base file's instant, the block header the deltacommit's."""
    table = mor_tables / "v6_trips_8i1u"
    [(path, [block])] = table_blocks(table).items()
    parsed = parse_log_file_name(path.rpartition("/")[2])
    [base_instant] = [
        parse_base_file_name(p.name).instant
        for p in table.rglob("*.parquet")
        if is_base_file_name(p.name) and parse_base_file_name(p.name).file_id == parsed.file_id
    ]
    assert parsed.instant == base_instant != block.instant
    assert (table / ".hoodie" / f"{block.instant}.deltacommit").is_file()
    assert log_file_instant(6, base_instant, block.instant) == parsed.instant
    assert log_file_instant(6, None, block.instant) == block.instant


@pytest.mark.parametrize("name", ["v8_trips_8i3u1d", "v9_txns_simple_nometa"])
def test_versions_8_and_9_name_logs_by_the_deltacommit(mor_tables: Path, name: str) -> None:
    """Each deltacommit writes version 1 of its own files, named by its requested time."""
    table = mor_tables / name
    completed = {p.name.partition("_")[0] for p in (table / ".hoodie/timeline").iterdir()}
    for path, blocks in table_blocks(table).items():
        parsed = parse_log_file_name(path.rpartition("/")[2])
        assert parsed.version == 1
        assert {block.instant for block in blocks} == {parsed.instant}
        assert parsed.instant in completed
        assert log_file_instant(int(name[1]), "20000101000000000", parsed.instant) == (
            parsed.instant
        )
