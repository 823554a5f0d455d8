"""Cell keys and index key lengths as Hudi writes them.

A cell's key is a full HBase ``KeyValue`` key, so HBase's reader can read Hudi's files:
``[2-byte row length][row][0x00 family length][Long.MAX_VALUE timestamp][0x04 Put]``; Hudi
only ever sets the row (the record key, UTF-8) and ignores the rest. Index entries give a
key's length as a Hadoop ``WritableUtils`` VInt, not a protobuf varint (they differ from 128
on).
"""

from __future__ import annotations

import struct

from tidemark.errors import DataLossError, InvalidArgumentError

__all__ = [
    "CELL_LENGTHS",
    "INDEX_ENTRY",
    "decode_vint",
    "encode_key",
    "encode_row",
    "encode_vint",
    "midpoint_key",
    "row_of",
]

_ROW_LENGTH = struct.Struct(">H")
_LATEST = b"\x00" + struct.pack(">q", 2**63 - 1)
"""Family length 0 and the "latest" timestamp: the same after every row."""
_PUT = b"\x04"
_MAXIMUM = b"\xff"
"""Key type Maximum: sorts before every real cell of its row."""
MAX_ROW_LENGTH = 2**15 - 1
CELL_LENGTHS = struct.Struct(">ii")
"""A data block cell's key and value lengths, before its key, value and MVCC VInt."""
INDEX_ENTRY = struct.Struct(">qi")
"""An index entry's block offset and on-disk size, before its key's VInt length and key."""


def encode_key(row: bytes) -> bytes:
    if len(row) > MAX_ROW_LENGTH:
        raise InvalidArgumentError(
            f"a {len(row)}-byte HFile row key is longer than {MAX_ROW_LENGTH} bytes", field="key"
        )
    return _ROW_LENGTH.pack(len(row)) + row + _LATEST + _PUT


def midpoint_key(left: bytes, right: bytes) -> bytes:
    """HBase's index key for a data block whose first row is ``right`` after a block ending
    at ``left`` (``PrivateCellUtil.getMidpoint``): the shortest row between the two (a byte
    past their common prefix, raised by one when that stays below ``right``, else
    ``right``'s), as the first possible key of that row."""
    common = 0
    while common < min(len(left), len(right)) and left[common] == right[common]:
        common += 1
    row = right[: common + 1]
    if common < len(left):
        signed = left[common] - 256 if left[common] >= 128 else left[common]  # a Java byte
        if left[common] < 0xFF and signed + 1 < right[common]:
            row = left[:common] + bytes([left[common] + 1])
    return _ROW_LENGTH.pack(len(row)) + row + _LATEST + _MAXIMUM


def encode_row(row: bytes) -> bytes:
    """``[2-byte length][row]``: Hudi 1.1's writer's index and last keys."""
    return encode_key(row)[: _ROW_LENGTH.size + len(row)]


def row_of(key: bytes) -> bytes:
    """The row of a full key (Hudi's reader, like this one, ignores what follows it)."""
    if len(key) < _ROW_LENGTH.size:
        raise DataLossError(f"a {len(key)}-byte HFile key has no row length", field="hfile")
    (length,) = _ROW_LENGTH.unpack_from(key)
    if _ROW_LENGTH.size + length > len(key):
        raise DataLossError(
            f"an HFile key says its row has {length} bytes, it has {len(key)} in all",
            field="hfile",
        )
    return key[_ROW_LENGTH.size : _ROW_LENGTH.size + length]


def encode_vint(value: int) -> bytes:
    """Hadoop's ``WritableUtils.writeVLong``: one byte for -112..127, else a length byte
    (which also carries the sign) and the big-endian magnitude."""
    if -112 <= value <= 127:
        return struct.pack(">b", value)
    first = -112
    if value < 0:
        value = ~value
        first = -120
    size = (value.bit_length() + 7) // 8
    return struct.pack(">b", first - size) + value.to_bytes(size, "big")


def decode_vint(data: bytes, offset: int) -> tuple[int, int]:
    """The VInt at ``offset`` and the offset after it."""
    if offset >= len(data):
        raise DataLossError(f"an HFile VInt at {offset} is past the end", field="hfile")
    (first,) = struct.unpack_from(">b", data, offset)
    if first >= -112:
        return first, offset + 1
    negative = first < -120
    size = (-120 - first) if negative else (-112 - first)
    end = offset + 1 + size
    if end > len(data):
        raise DataLossError(f"an HFile VInt at {offset} is cut short", field="hfile")
    value = int.from_bytes(data[offset + 1 : end], "big")
    return (~value if negative else value), end
