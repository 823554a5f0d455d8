"""The ``#HUDI#`` block framing: every log file Hudi wrote reads and re-encodes to its own
bytes, and a writer's crash leaves corrupt blocks that are read the way Hudi reads them."""

from __future__ import annotations

import io
import struct
from collections import Counter
from pathlib import Path

import pytest

from table.log_testkit import MOR_NAMES, log_paths
from tidemark.errors import AlreadyExistsError, DataLossError, InvalidArgumentError
from tidemark.storage import open_storage
from tidemark.table.logfiles.framing import (
    MAGIC,
    BlockType,
    HeaderKey,
    LogBlock,
    append_blocks,
    encode_block,
    read_blocks,
    read_log_file,
    write_log_file,
)

INSTANT = "20250331030645735"


def block(content: bytes = b"payload", instant: str = INSTANT) -> LogBlock:
    header = {HeaderKey.INSTANT_TIME: instant, HeaderKey.SCHEMA: '{"type":"null"}'}
    return LogBlock(BlockType.AVRO_DATA, header, content)


@pytest.mark.parametrize("name", MOR_NAMES)
def test_every_log_file_reads_and_encodes_back_to_its_bytes(mor_tables: Path, name: str) -> None:
    """Data and metadata-table logs alike: block lengths, header layout (in the file's own
    key order), contents, empty footers and reverse pointers are all Hudi's."""
    kinds: Counter[BlockType] = Counter()
    for path in log_paths(mor_tables / name, metadata_table=True):
        data = path.read_bytes()
        blocks = read_blocks(data)
        assert blocks
        assert b"".join(encode_block(b) for b in blocks) == data
        for found in blocks:
            kinds[found.block_type] += 1
            assert found.footer == {}
            assert len(found.instant) == 17
            if found.block_type == BlockType.HFILE_DATA:
                assert found.content.startswith(b"DATABLK*")  # an HFile's first data block
    assert BlockType.CORRUPT not in kinds
    assert kinds


def test_the_fixtures_hold_every_block_type_hudis_writers_use(mor_tables: Path) -> None:
    kinds = {
        found.block_type
        for name in MOR_NAMES
        for path in log_paths(mor_tables / name, metadata_table=True)
        for found in read_blocks(path.read_bytes())
    }
    assert kinds == {
        BlockType.AVRO_DATA,
        BlockType.PARQUET_DATA,
        BlockType.DELETE,
        BlockType.COMMAND,
        BlockType.HFILE_DATA,
    }


def test_the_frame_layout() -> None:
    encoded = encode_block(block(b"abc"))
    header = b"".join(
        [
            struct.pack(">i", 2),
            struct.pack(">ii", 0, 17) + INSTANT.encode(),
            struct.pack(">ii", 2, 15) + b'{"type":"null"}',
        ]
    )
    body = b"".join(
        [
            struct.pack(">ii", 1, 3),
            header,
            struct.pack(">q", 3),
            b"abc",
            struct.pack(">i", 0),
        ]
    )
    length = len(body) + 8
    assert encoded == MAGIC + struct.pack(">q", length) + body + struct.pack(">q", length + 6)


def test_blocks_appended_to_a_stream_read_back_in_order() -> None:
    stream = io.BytesIO()
    blocks = [block(b"one"), block(b""), block(b"three", "20250331030645736")]
    written = append_blocks(stream, blocks[:2])
    written += append_blocks(stream, blocks[2:])
    assert written == len(stream.getvalue())
    read = read_blocks(stream.getvalue())
    assert read == blocks
    sizes = [len(encode_block(b)) for b in blocks]
    assert [b.offset for b in read] == [0, sizes[0], sizes[0] + sizes[1]]


def test_a_log_file_is_written_once(local_root: str) -> None:
    storage = open_storage(local_root)
    path = f"p/.f-0_{INSTANT}.log.1_0-1-2"
    size = write_log_file(storage, path, [block(b"first"), block(b"second")])
    assert size == storage.size(path)
    assert [b.content for b in read_log_file(storage, path)] == [b"first", b"second"]
    with pytest.raises(AlreadyExistsError):
        write_log_file(storage, path, [block(b"again")])
    assert [b.content for b in read_log_file(storage, path)] == [b"first", b"second"]


@pytest.mark.parametrize("kept", [3, 6, 10, 30, 60, -8, -1])
def test_a_block_cut_short_by_a_crash_is_a_corrupt_block(kept: int) -> None:
    """Whatever part of the last block made it, the blocks before it read whole and the rest
    is one corrupt block holding the bytes after its magic (Hudi's HoodieCorruptBlock)."""
    good = encode_block(block(b"good"))
    partial = encode_block(block(b"lost"))[:kept]
    blocks = read_blocks(good + partial)
    if 0 <= kept < len(MAGIC):
        assert blocks == [block(b"good")]  # no whole magic: the end of the file
        return
    assert blocks[0] == block(b"good")
    assert blocks[1:] == [LogBlock(BlockType.CORRUPT, {}, partial[len(MAGIC) :])]
    assert blocks[1].offset == len(good)


def test_a_corrupt_block_ends_at_the_next_magic() -> None:
    """A block whose reverse pointer disagrees is corrupt up to the next block, which reads."""
    damaged = bytearray(encode_block(block(b"torn")))
    damaged[-1] ^= 0xFF
    after = encode_block(block(b"after"))
    blocks = read_blocks(bytes(damaged) + after)
    assert [b.block_type for b in blocks] == [BlockType.CORRUPT, BlockType.AVRO_DATA]
    assert blocks[0].content == bytes(damaged[len(MAGIC) :])
    assert blocks[1] == block(b"after")
    assert blocks[1].offset == len(damaged)


def test_a_block_followed_by_neither_magic_nor_the_end_is_corrupt() -> None:
    data = encode_block(block(b"x")) + b"garbage!"
    [corrupt] = read_blocks(data)
    assert corrupt.block_type == BlockType.CORRUPT
    assert corrupt.content == data[len(MAGIC) :]


def test_an_empty_log_file_has_no_blocks() -> None:
    assert read_blocks(b"") == []


def test_bytes_without_the_magic_are_damage() -> None:
    with pytest.raises(DataLossError) as raised:
        read_blocks(b"not a log file")
    assert raised.value.field == "log_file"


def test_a_well_framed_block_of_an_unknown_type_is_damage() -> None:
    data = bytearray(encode_block(block()))
    data[18:22] = struct.pack(">i", 9)
    with pytest.raises(DataLossError, match="unknown block type 9"):
        read_blocks(bytes(data))


def test_the_legacy_format_version_is_refused() -> None:
    data = bytearray(encode_block(block()))
    data[14:18] = struct.pack(">i", 0)
    with pytest.raises(InvalidArgumentError, match="log format version 0"):
        read_blocks(bytes(data))


def test_a_corrupt_block_is_never_written() -> None:
    with pytest.raises(InvalidArgumentError):
        encode_block(LogBlock(BlockType.CORRUPT, {}, b"x"))


def test_a_block_without_an_instant_says_so() -> None:
    with pytest.raises(DataLossError, match="no INSTANT_TIME"):
        _ = LogBlock(BlockType.COMMAND, {}).instant
