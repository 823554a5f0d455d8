"""Writing an HFile as Hudi does, in either of its writers' layouts (``Style``).

``write_hfile`` takes the cells sorted by row, the caller's file info entries (Hudi's
``schema``, ``bloomFilterTypeCode``, ``minRecordKey``, ``maxRecordKey``) and meta blocks
(``bloomFilter``), and adds the entries every HFile carries: ``hfile.LASTKEY``,
``hfile.AVG_KEY_LEN``, ``hfile.AVG_VALUE_LEN``, ``hfile.CREATE_TIME_TS``,
``KEY_VALUE_VERSION`` (1: cells carry an MVCC timestamp) and ``MAX_MEMSTORE_TS_KEY`` (0).
What the two styles do differently, each as its writer does:

- ``HBASE``: file info sorted by key (HBase's ``TreeMap``), full cell keys in the index and
  as the last key, average lengths over full keys, blocks linked to the previous block of
  their type, the trailer's data index size and total uncompressed bytes as HBase counts
  them. A data block closes once it holds ``block_size`` bytes. HBase shortens the index
  key of a block after the first to a "fake" key between its neighbours; this writer
  indexes the real first key, which every reader (Hudi's, hudi-rs, this one) finds alike.
- ``HUDI``: file info and meta blocks in Java ``HashMap`` order, ``[length][row]`` as
  index and last keys, average lengths over rows, no links, the data blocks' uncompressed
  size as the trailer's index size. A data block closes before a cell would take it past
  ``block_size``.

Both keep a row's cells in one block. Hudi's metadata files hold one data block each (the
fixtures' all do); the HBase layout's later blocks were checked against hudi-rs's test
HFiles (Hudi 1.0, HBase 2.4, 3 to 86 blocks). For the Hudi 1.1 layout a block's size is
counted as that writer's trailer counts the data (whole cells: the fixtures' files show
it), which hudi-io's newer source counts over rows instead; no Hudi-written file with two
blocks was at hand to settle it.
"""

from __future__ import annotations

import itertools
import struct
import time
from collections.abc import Iterable, Iterator, Mapping

from tidemark.errors import InvalidArgumentError
from tidemark.hfile.blocks import HEADER, Magic, encode_block
from tidemark.hfile.keys import (
    CELL_LENGTHS,
    INDEX_ENTRY,
    encode_key,
    encode_row,
    encode_vint,
    midpoint_key,
)
from tidemark.hfile.style import Style, WriteOptions
from tidemark.hfile.trailer import (
    AVG_KEY_LEN,
    AVG_VALUE_LEN,
    CREATE_TIME_TS,
    KEY_VALUE_VERSION,
    LAST_KEY,
    MAX_MEMSTORE_TS_KEY,
    RESERVED_FILE_INFO,
    TRAILER_SIZE,
    Trailer,
    encode_file_info,
    encode_trailer,
)
from tidemark.proto.hfile.v1.hfile_pb2 import TrailerProto

__all__ = ["write_hfile"]

_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_NO_OFFSET = 2**64 - 1
"""-1 as the trailer's unsigned data block offsets, when there is no data block."""


def _java_hash(key: bytes) -> int:
    """Java's ``HashMap`` bucket hash of the key as a ``String`` (UTF-16 code units)."""
    text = key.decode("utf-8", errors="surrogatepass").encode("utf-16-be", "surrogatepass")
    value = 0
    for (unit,) in struct.iter_unpack(">H", text):
        value = (31 * value + unit) & 0xFFFFFFFF
    return value ^ (value >> 16)


def _hash_map_order(entries: Mapping[bytes, bytes]) -> dict[bytes, bytes]:
    """Iteration order of a Java ``HashMap`` the entries were put into in this order: by
    bucket at the table's final capacity, then by insertion."""
    capacity = 16
    while len(entries) > capacity * 3 // 4:
        capacity *= 2
    keys = sorted(entries, key=lambda key: _java_hash(key) & (capacity - 1))
    return {key: entries[key] for key in keys}


class _Layout:
    """The file as it is laid out: blocks appended, each offset known."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options
        self.chunks: list[bytes] = []
        self.offset = 0
        self._previous: dict[Magic, int] = {}

    def append(self, magic: Magic, data: bytes) -> tuple[int, int]:
        """Writes one block; its offset and on-disk size."""
        previous = self._previous.get(magic, -1) if self.options.style is Style.HBASE else -1
        block = encode_block(
            magic,
            data,
            codec=self.options.codec,
            checksum=self.options.style.checksum,
            previous_offset=previous,
        )
        offset = self.offset
        self._previous[magic] = offset
        self.chunks.append(block)
        self.offset += len(block)
        return offset, len(block)


def _index(entries: Iterable[tuple[bytes, int, int]]) -> bytes:
    return b"".join(
        INDEX_ENTRY.pack(offset, size) + encode_vint(len(key)) + key
        for key, offset, size in entries
    )


def _sorted(cells: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    listed = list(cells)
    for (before, _), (row, _) in itertools.pairwise(listed):
        if row < before:
            raise InvalidArgumentError(
                f"HFile rows must be sorted: {row!r} comes after {before!r}", field="cells"
            )
    return listed


def _data_blocks(
    cells: list[tuple[bytes, bytes]], options: WriteOptions
) -> Iterator[list[tuple[bytes, bytes]]]:
    """The cells grouped into data blocks by the style's rule."""
    block: list[tuple[bytes, bytes]] = []
    size = 0
    for row, value in cells:
        cell_size = CELL_LENGTHS.size + len(encode_key(row)) + len(value) + 1
        full = (
            size >= options.block_size
            if options.style is Style.HBASE
            else size + cell_size > options.block_size
        )
        if block and full and row != block[-1][0]:  # a row's cells share a block
            yield block
            block, size = [], 0
        block.append((row, value))
        size += cell_size
    if block:
        yield block


def _cell(row: bytes, value: bytes) -> bytes:
    key = encode_key(row)
    return CELL_LENGTHS.pack(len(key), len(value)) + key + value + encode_vint(0)


def write_hfile(
    cells: Iterable[tuple[bytes, bytes]],
    *,
    file_info: Mapping[bytes, bytes],
    meta_blocks: Mapping[str, bytes] | None = None,
    options: WriteOptions | None = None,
    create_time_ms: int | None = None,
) -> bytes:
    """The bytes of an HFile holding ``cells`` (row, value), sorted by row."""
    options = options or WriteOptions()
    hbase = options.style is Style.HBASE
    index_key = encode_key if hbase else encode_row
    reserved = RESERVED_FILE_INFO & file_info.keys()
    if reserved:
        raise InvalidArgumentError(
            f"HFile file info {sorted(reserved)} is computed by the writer", field="file_info"
        )
    rows = _sorted(cells)
    layout = _Layout(options)
    data_index: list[tuple[bytes, int, int]] = []
    data_bytes = 0
    previous_row: bytes | None = None
    for block in _data_blocks(rows, options):
        payload = b"".join(_cell(row, value) for row, value in block)
        first_row = block[0][0]
        if hbase and previous_row is not None:
            key = midpoint_key(previous_row, first_row)
        else:
            key = index_key(first_row)
        data_index.append((key, *layout.append(Magic.DATA, payload)))
        data_bytes += len(payload)
        previous_row = block[-1][0]
    named = {name.encode(): data for name, data in (meta_blocks or {}).items()}
    metas = dict(sorted(named.items())) if hbase else _hash_map_order(named)
    meta_index = [(name, *layout.append(Magic.META, data)) for name, data in metas.items()]
    index_payload = _index(data_index)
    load_on_open, _ = layout.append(Magic.ROOT_INDEX, index_payload)
    meta_payload = _index(meta_index)
    layout.append(Magic.ROOT_INDEX, meta_payload)
    info_payload = encode_file_info(_file_info(file_info, rows, options, create_time_ms))
    file_info_offset, _ = layout.append(Magic.FILE_INFO, info_payload)
    trailer = TrailerProto(
        file_info_offset=file_info_offset,
        load_on_open_data_offset=load_on_open,
        uncompressed_data_index_size=len(index_payload) if hbase else data_bytes,
        data_index_count=len(data_index),
        meta_index_count=len(meta_index),
        entry_count=len(rows),
        num_data_index_levels=1,
        first_data_block_offset=data_index[0][1] if data_index else _NO_OFFSET,
        last_data_block_offset=data_index[-1][1] if data_index else (_NO_OFFSET if hbase else 0),
        comparator_class_name=options.comparator,
        compression_codec=options.codec,
    )
    if hbase:
        # HBase counts every block but the root data index, each with its header.
        counted = [data_bytes, *map(len, metas.values()), len(meta_payload), len(info_payload)]
        headers = (len(data_index) + len(metas) + 2) * HEADER.size
        trailer.total_uncompressed_bytes = sum(counted) + headers + TRAILER_SIZE
    layout.chunks.append(encode_trailer(Trailer(trailer, options.style.minor_version)))
    return b"".join(layout.chunks)


def _file_info(
    file_info: Mapping[bytes, bytes],
    rows: list[tuple[bytes, bytes]],
    options: WriteOptions,
    create_time_ms: int | None,
) -> dict[bytes, bytes]:
    hbase = options.style is Style.HBASE
    count = len(rows)
    key_bytes = sum(len(encode_key(row)) if hbase else len(row) for row, _ in rows)
    value_bytes = sum(len(value) for _, value in rows)
    created = time.time_ns() // 1_000_000 if create_time_ms is None else create_time_ms
    # in the order Hudi 1.1's writer puts them into its HashMap (the order within a bucket)
    info = {MAX_MEMSTORE_TS_KEY: _LONG.pack(0), **file_info}
    if rows:
        info[LAST_KEY] = (encode_key if hbase else encode_row)(rows[-1][0])
    elif not hbase:
        info[LAST_KEY] = b""  # HBase leaves an empty file without a last key
    info[AVG_KEY_LEN] = _INT.pack(key_bytes // count if count else 0)
    info[CREATE_TIME_TS] = _LONG.pack(created)
    info[AVG_VALUE_LEN] = _INT.pack(value_bytes // count if count else 0)
    info[KEY_VALUE_VERSION] = _INT.pack(1)
    return dict(sorted(info.items())) if hbase else _hash_map_order(info)
