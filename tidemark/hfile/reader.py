"""Reading an HFile: its trailer, load-on-open blocks and file info when opened; data
blocks when a lookup, scan or walk reaches them.

Point lookups find the block through the root index (the last block whose first row is
at most the row); scans start there too. Rows compare as unsigned bytes (Hudi's
``HoodieHBaseKVComparator`` compares rows only). Hudi writes one index level and MVCC 0 on
every cell; anything else is refused, as Hudi's reader and hudi-rs refuse it.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from tidemark.errors import DataLossError, InvalidArgumentError
from tidemark.hfile.blocks import Block, Codec, Magic, decode_block
from tidemark.hfile.keys import CELL_LENGTHS, INDEX_ENTRY, decode_vint, row_of
from tidemark.hfile.style import Style, WriteOptions
from tidemark.hfile.trailer import (
    CREATE_TIME_TS,
    MAX_MEMSTORE_TS_KEY,
    RESERVED_FILE_INFO,
    Trailer,
    decode_file_info,
    decode_trailer,
)

__all__ = ["Cell", "HFileReader", "IndexEntry", "read_index"]

_LONG = struct.Struct(">q")


class Cell(NamedTuple):
    row: bytes
    value: bytes


@dataclass(frozen=True)
class IndexEntry:
    key: bytes
    """The data block's first row (a meta block's name for the meta index)."""
    offset: int
    size: int


def read_index(block: Block, count: int, *, data_keys: bool) -> list[IndexEntry]:
    """The ``count`` entries of a root index block; a data index's keys are full cell keys,
    read as their rows."""
    entries: list[IndexEntry] = []
    data, at = block.data, 0
    for _ in range(count):
        if at + INDEX_ENTRY.size > len(data):
            raise DataLossError(f"the HFile index at {block.offset} is cut short", field="hfile")
        offset, size = INDEX_ENTRY.unpack_from(data, at)
        length, at = decode_vint(data, at + INDEX_ENTRY.size)
        key = data[at : at + length]
        if length < 0 or len(key) != length:
            raise DataLossError(f"the HFile index at {block.offset} is cut short", field="hfile")
        at += length
        entries.append(IndexEntry(row_of(key) if data_keys else key, offset, size))
    if at != len(data):
        raise DataLossError(
            f"the HFile index at {block.offset} has {len(data) - at} bytes after its entries",
            field="hfile",
        )
    return entries


def _cells(block: Block) -> Iterator[Cell]:
    data, at = block.data, 0
    while at < len(data):
        if at + CELL_LENGTHS.size > len(data):
            raise DataLossError(f"the HFile block at {block.offset} is cut short", field="hfile")
        key_length, value_length = CELL_LENGTHS.unpack_from(data, at)
        key_end = at + CELL_LENGTHS.size + key_length
        value_end = key_end + value_length
        if key_length < 0 or value_length < 0 or value_end >= len(data):
            raise DataLossError(f"the HFile block at {block.offset} is cut short", field="hfile")
        cell = Cell(row_of(data[at + CELL_LENGTHS.size : key_end]), data[key_end:value_end])
        mvcc, at = decode_vint(data, value_end)
        if mvcc != 0:
            raise InvalidArgumentError(
                f"the HFile block at {block.offset} has a cell with MVCC {mvcc} (Hudi writes 0)",
                field="hfile",
            )
        yield cell


class HFileReader:
    """One HFile held in memory (Hudi's metadata files and log blocks are small)."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self.trailer: Trailer = decode_trailer(data)
        message = self.trailer.message
        try:
            self.codec = Codec(message.compression_codec)
        except ValueError:
            raise InvalidArgumentError(
                f"HFile compression codec {message.compression_codec} is not supported "
                "(only GZ and NONE)",
                field="hfile",
            ) from None
        if message.data_index_count and message.num_data_index_levels != 1:
            raise InvalidArgumentError(
                f"an HFile data index of {message.num_data_index_levels} levels is not "
                "supported (Hudi writes one)",
                field="hfile",
            )
        self.style = Style.HBASE if self.trailer.minor_version == 3 else Style.HUDI
        root = self._block(message.load_on_open_data_offset, Magic.ROOT_INDEX)
        self.data_index = read_index(root, message.data_index_count, data_keys=True)
        meta_index = self._block(root.offset + root.size, Magic.ROOT_INDEX)
        self.meta_index = read_index(meta_index, message.meta_index_count, data_keys=False)
        file_info = self._block(message.file_info_offset, Magic.FILE_INFO)
        self.file_info = decode_file_info(file_info.data)
        max_ts = self.file_info.get(MAX_MEMSTORE_TS_KEY, bytes(_LONG.size))
        if len(max_ts) != _LONG.size or _LONG.unpack(max_ts)[0] != 0:
            raise InvalidArgumentError(
                f"HFile {MAX_MEMSTORE_TS_KEY.decode()} is {max_ts.hex()} (Hudi writes 0)",
                field="hfile",
            )
        self._first_rows = [entry.key for entry in self.data_index]

    def _block(self, offset: int, magic: Magic) -> Block:
        return decode_block(self._data, offset, self.codec, magic)

    @property
    def options(self) -> WriteOptions:
        """How the file was written, as far as the file tells (not its block size)."""
        return WriteOptions(
            self.style, self.codec, comparator=self.trailer.message.comparator_class_name
        )

    @property
    def user_file_info(self) -> dict[bytes, bytes]:
        """The file info entries the writer's caller gave (the rest the writer computes)."""
        return {k: v for k, v in self.file_info.items() if k not in RESERVED_FILE_INFO}

    @property
    def create_time_ms(self) -> int:
        return int(_LONG.unpack(self.file_info.get(CREATE_TIME_TS, bytes(_LONG.size)))[0])

    @property
    def meta_blocks(self) -> dict[str, bytes]:
        """Each meta block's data by name (Hudi's bloom filter is ``bloomFilter``)."""
        return {
            entry.key.decode(): self._block(entry.offset, Magic.META).data
            for entry in self.meta_index
        }

    def _block_cells(self, index: int) -> Iterator[Cell]:
        return _cells(self._block(self.data_index[index].offset, Magic.DATA))

    def cells(self) -> Iterator[Cell]:
        for index in range(len(self.data_index)):
            yield from self._block_cells(index)

    def scan(self, start: bytes = b"", stop: bytes | None = None) -> Iterator[Cell]:
        """The cells whose rows are in ``[start, stop)`` (``stop`` None: to the end)."""
        first = max(bisect.bisect_right(self._first_rows, start) - 1, 0)
        for index in range(first, len(self.data_index)):
            if stop is not None and self._first_rows[index] >= stop:
                return
            for cell in self._block_cells(index):
                if stop is not None and cell.row >= stop:
                    return
                if cell.row >= start:
                    yield cell

    def scan_prefix(self, prefix: bytes) -> Iterator[Cell]:
        for cell in self.scan(prefix):
            if not cell.row.startswith(prefix):
                return
            yield cell

    def get(self, row: bytes) -> bytes | None:
        """The value of the first cell with this row, None when there is none."""
        for cell in self.scan(row):
            return cell.value if cell.row == row else None
        return None
