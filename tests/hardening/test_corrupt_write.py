"""A write never proceeds on a table whose metadata it cannot read: with a damaged
hoodie.properties, last commit, pending requested replacecommit or table-lock lease, an
upsert fails with DataLossError naming the file, in one line; the timeline and the data
files stay byte-identical and the table lock is free (a damaged lease is not taken)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from faults.faultkit import bulk_insert, rows, write_rows
from table.table_testkit import file_tree

from tidemark.errors import DataLossError
from tidemark.storage import open_storage
from tidemark.table import HoodieTable
from tidemark.table.leases.storage_lease import LOCK_DIR, StorageLease
from tidemark.table.metadata.actions import REPLACE_COMMIT
from tidemark.table.properties.config import PROPERTIES_PATH
from tidemark.table.timeline.instant import Instant, State

from .damagekit import truncate

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LATER = "29990101000000000"


def _truncate_properties(root: Path) -> str:
    truncate(root / PROPERTIES_PATH)
    return PROPERTIES_PATH


def _damage_last_commit(root: Path) -> str:
    last = HoodieTable.open(str(root)).timeline.last_completed()
    assert last is not None
    (root / last.path).write_bytes(b'{"partitionToWriteStats": {"p": [{"fileId": ')
    return last.path


def _garbage_plan(root: Path) -> str:
    requested = Instant(LATER, REPLACE_COMMIT, State.REQUESTED)
    (root / requested.path).write_bytes(b"Obj\x01\x04\x14avro.schema\x00garbage")
    return requested.path


def _garbage_lock(root: Path) -> str:
    relative = f"{LOCK_DIR}/{99:020d}"
    (root / relative).parent.mkdir(parents=True, exist_ok=True)
    (root / relative).write_bytes(b"\x00\x01 not a lease")
    return relative


DAMAGES: dict[str, Callable[[Path], str]] = {
    "hoodie.properties truncated": _truncate_properties,
    "last commit invalid JSON": _damage_last_commit,
    "requested replacecommit invalid Avro": _garbage_plan,
    "table lock lease garbage": _garbage_lock,
}


@pytest.fixture(scope="module")
def written(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A table of one bulk insert, copied by each test before it damages its copy."""
    root = tmp_path_factory.mktemp("written") / "table"
    bulk_insert(spark, rows(0, 6, "first"), str(root), markers="direct")
    return root


@pytest.mark.parametrize("damage", list(DAMAGES), ids=list(DAMAGES))
def test_a_write_on_a_table_with_damaged_metadata_fails_and_writes_nothing(
    spark: SparkSession, written: Path, tmp_path: Path, damage: str
) -> None:
    root = Path(shutil.copytree(written, tmp_path / "table"))
    relative = DAMAGES[damage](root)
    before = file_tree(root)

    with pytest.raises(DataLossError) as refused:
        write_rows(spark, rows(3, 6, "second"), str(root), "upsert", markers="direct")

    message = str(refused.value)
    assert f"{relative} is damaged" in message and len(message.splitlines()) == 1, message
    if relative.startswith(LOCK_DIR):
        assert file_tree(root) == before  # the damaged lock was not taken
    else:  # the write took the lock, found the damage and released the lock
        assert _without_lock(file_tree(root)) == _without_lock(before)
        assert StorageLease(open_storage(str(root)), "probe", heartbeat=False).live_lease() is None


def _without_lock(tree: dict[str, bytes]) -> dict[str, bytes]:
    return {path: data for path, data in tree.items() if not path.startswith(f"{LOCK_DIR}/")}
