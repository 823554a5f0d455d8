"""A damaged record index is detected and reported, never answered from: each damage to
a shard file, a delta, a stage manifest, a bases record or index.properties makes a
lookup fail with DATA_LOSS (the engine's DataLossError through the service) naming the
file and the way out, and nothing is written."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pyarrow as pa
import pytest
from index.indexkit import Commits
from index.servicekit import (
    BUILT_AS_OF,
    KEYS,
    SHARDS,
    build_index,
    create_table,
    keys_payload,
    location_of,
)
from table.table_testkit import file_tree

from tidemark.cli import main
from tidemark.errors import DataLossError
from tidemark.index import layout
from tidemark.index.record_index import RecordIndex
from tidemark.index.sharding import shard_of
from tidemark.proto.common.v1.common_pb2 import TableRef
from tidemark.proto.index.v1 import index_service_pb2 as pb
from tidemark.proto.index.v1.index_service_pb2_grpc import IndexServiceStub
from tidemark.rpc.client import channel_for
from tidemark.rpc.embedded import EmbeddedServer
from tidemark.services.index.embedded import start_embedded_index_service
from tidemark.storage import open_storage

from .damagekit import flip_bit, truncate, wrong_section_checksum

REBUILD = "tidemark index build --rebuild"
CHANGED = KEYS[:40]
"""Keys a completed commit moved (so the shard of ``KEYS[0]`` has a delta)."""


@pytest.fixture(scope="module")
def index_stub() -> Iterator[IndexServiceStub]:
    """One index service on loopback for the module (every test damages its own table)."""
    service: EmbeddedServer
    with start_embedded_index_service() as service, channel_for(service.address) as ch:
        yield IndexServiceStub(ch)


@pytest.fixture
def table(local_root: str) -> Path:
    """A table whose index holds ``KEYS`` in its bases and ``CHANGED`` in deltas of one
    completed commit."""
    storage = create_table(local_root).storage
    build_index(storage, KEYS)
    commits = Commits(storage)
    instant = commits.start()
    RecordIndex.open(storage).stage(
        instant,
        pa.table(
            {
                "key": pa.array(CHANGED),
                "partition": pa.array(["dt=moved"] * len(CHANGED)),
                "file_id": pa.array([location_of(key)[1] for key in CHANGED]),
            }
        ),
    )
    commits.complete(instant)
    return Path(local_root)


SHARD = int(shard_of(pa.array(KEYS[:1]), SHARDS)[0])
"""The shard of ``KEYS[0]``: its base and its delta are the files damaged."""


def _base(root: Path) -> str:
    return layout.base_path(SHARD, BUILT_AS_OF)


def _delta(root: Path) -> str:
    (path,) = (root / layout.shard_dir(SHARD)).glob("delta_*")
    return path.relative_to(root).as_posix()


def _manifest(root: Path) -> str:
    (path,) = (root / layout.STAGED_DIR).glob("*.json")
    return path.relative_to(root).as_posix()


def _write(relative: str, data: bytes) -> Callable[[Path], str]:
    def damage(root: Path) -> str:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_bytes(data)
        return relative

    return damage


def _on(pick: Callable[[Path], str], damage: Callable[[Path], object]) -> Callable[[Path], str]:
    def apply(root: Path) -> str:
        relative = pick(root)
        damage(root / relative)
        return relative

    return apply


DAMAGES: dict[str, Callable[[Path], str]] = {
    "base truncated": _on(_base, truncate),
    "base bit flip in a data block": _on(_base, lambda path: flip_bit(path, 3)),
    "base wrong section checksum": _on(_base, wrong_section_checksum),
    "delta truncated": _on(_delta, truncate),
    "delta bit flip in a data block": _on(_delta, lambda path: flip_bit(path, 3)),
    "delta wrong section checksum": _on(_delta, wrong_section_checksum),
    "manifest names a missing delta": _on(_delta, Path.unlink),
    "manifest is not JSON": _on(_manifest, lambda path: path.write_bytes(b'{"instant": "2')),
    "manifest is binary garbage": _on(_manifest, lambda path: path.write_bytes(b"\xff\xfe\x00")),
    "bases record is not a list of instants": _write(f"{layout.BASES_DIR}/29990101.json", b"[1]"),
    "index.properties is binary garbage": _write(layout.PROPERTIES_PATH, b"\xff\x00\x13garbage"),
    "index.properties is truncated": _write(layout.PROPERTIES_PATH, b"tidemark.record.index.sh"),
}


@pytest.mark.parametrize("damage", list(DAMAGES), ids=list(DAMAGES))
def test_a_damaged_index_is_reported_naming_the_file_and_never_answered_from(
    table: Path, index_stub: IndexServiceStub, damage: str
) -> None:
    relative = DAMAGES[damage](table)
    before = file_tree(table)

    with pytest.raises(grpc.RpcError) as refused:
        index_stub.Lookup(
            pb.LookupRequest(table=TableRef(base_path=str(table)), keys=keys_payload(KEYS))
        )
    with pytest.raises(DataLossError) as engine:
        RecordIndex.open(open_storage(str(table))).lookup(pa.array(KEYS))

    assert refused.value.code() == grpc.StatusCode.DATA_LOSS
    for message in (refused.value.details() or "", str(engine.value)):
        assert relative in message and REBUILD in message, message
        assert len(message.splitlines()) == 1
    assert file_tree(table) == before


def test_the_cli_reports_a_damaged_shard_in_one_line_and_exits_2(
    table: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    relative = DAMAGES["base bit flip in a data block"](table)

    assert main(["index", "lookup", "--table", str(table), KEYS[0]]) == 2

    captured = capsys.readouterr()
    assert not captured.out
    assert captured.err.count("\n") == 1 and relative in captured.err and REBUILD in captured.err


def test_a_damaged_shard_on_s3_is_reported_naming_its_s3_uri(s3_bucket: str) -> None:
    """The same check on the S3 backend, whose reader fetches blocks by ranged GETs."""
    storage = create_table(s3_bucket).storage
    build_index(storage, KEYS)
    relative = _base(Path())
    data = bytearray(storage.read(relative))
    data[3] ^= 1
    storage.write(relative, bytes(data))

    with pytest.raises(DataLossError) as refused:
        RecordIndex.open(open_storage(s3_bucket)).lookup(pa.array(KEYS))

    assert f"{s3_bucket}/{relative} is damaged" in str(refused.value), refused.value
    assert REBUILD in str(refused.value)
