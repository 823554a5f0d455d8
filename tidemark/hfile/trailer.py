"""The HFile trailer and the file info block, both protobuf messages behind a magic.

The trailer is the file's last 4096 bytes: ``TRABLK"$``, a length-delimited
``TrailerProto``, zeros, and the version in the last 4 bytes (major in the low 3 bytes,
minor in the high byte: HBase writes 3.3, Hudi 1.1's writer 3.0). The file info block's
data is ``PBUF`` and a length-delimited ``InfoProto``: its entries in the order written.
The length prefix is a protobuf varint written here because protobuf's Python API has no
public ``writeDelimitedTo``/``parseDelimitedFrom``.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import TypeVar

from google.protobuf.message import DecodeError

from tidemark.errors import DataLossError, InvalidArgumentError
from tidemark.proto.hfile.v1.hfile_pb2 import BytesBytesPair, InfoProto, TrailerProto

__all__ = [
    "COMPARATOR",
    "RESERVED_FILE_INFO",
    "TRAILER_SIZE",
    "Trailer",
    "decode_file_info",
    "decode_trailer",
    "encode_file_info",
    "encode_trailer",
]

TRAILER_SIZE = 4096
MAGIC = b'TRABLK"$'
MAJOR_VERSION = 3
COMPARATOR = "org.apache.hudi.io.storage.HoodieHBaseKVComparator"
LAST_KEY = b"hfile.LASTKEY"
AVG_KEY_LEN = b"hfile.AVG_KEY_LEN"
AVG_VALUE_LEN = b"hfile.AVG_VALUE_LEN"
CREATE_TIME_TS = b"hfile.CREATE_TIME_TS"
KEY_VALUE_VERSION = b"KEY_VALUE_VERSION"
MAX_MEMSTORE_TS_KEY = b"MAX_MEMSTORE_TS_KEY"
RESERVED_FILE_INFO = frozenset(
    {LAST_KEY, AVG_VALUE_LEN, AVG_KEY_LEN, KEY_VALUE_VERSION, MAX_MEMSTORE_TS_KEY, CREATE_TIME_TS}
)
"""The entries the writer computes, not its caller."""
_FILE_INFO_MAGIC = b"PBUF"
_VERSION = struct.Struct(">I")


class Trailer:
    """A decoded trailer: its message (fields set exactly as read) and minor version."""

    def __init__(self, message: TrailerProto, minor_version: int) -> None:
        self.message = message
        self.minor_version = minor_version


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _delimited(data: bytes, offset: int, what: str) -> tuple[bytes, int]:
    """The message bytes after the varint length at ``offset``, and the offset after them."""
    length = shift = 0
    while True:
        if offset >= len(data) or shift > 28:
            raise DataLossError(f"the HFile {what} has no readable length", field="hfile")
        byte = data[offset]
        offset += 1
        length |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    if offset + length > len(data):
        raise DataLossError(f"the HFile {what} is cut short", field="hfile")
    return data[offset : offset + length], offset + length


_M = TypeVar("_M", TrailerProto, InfoProto)


def _parse(message: _M, data: bytes, what: str) -> _M:
    try:
        message.ParseFromString(data)
    except DecodeError as error:
        raise DataLossError(f"the HFile {what} does not decode: {error}", field="hfile") from None
    return message


def decode_trailer(file: bytes) -> Trailer:
    if len(file) < TRAILER_SIZE or file[-TRAILER_SIZE:][: len(MAGIC)] != MAGIC:
        raise DataLossError("not an HFile: no trailer in the last 4096 bytes", field="hfile")
    block = file[-TRAILER_SIZE:]
    (version,) = _VERSION.unpack_from(block, TRAILER_SIZE - _VERSION.size)
    if version & 0xFFFFFF != MAJOR_VERSION:
        raise InvalidArgumentError(
            f"HFile major version {version & 0xFFFFFF} is not supported (only 3)", field="hfile"
        )
    message, _ = _delimited(block[: TRAILER_SIZE - _VERSION.size], len(MAGIC), "trailer")
    return Trailer(_parse(TrailerProto(), message, "trailer"), version >> 24)


def encode_trailer(trailer: Trailer) -> bytes:
    message = trailer.message.SerializeToString()
    head = MAGIC + _varint(len(message)) + message
    padding = TRAILER_SIZE - _VERSION.size - len(head)
    if padding < 0:
        raise InvalidArgumentError(
            f"an HFile trailer of {len(head)} bytes does not fit in {TRAILER_SIZE}", field="hfile"
        )
    version = trailer.minor_version << 24 | MAJOR_VERSION
    return head + bytes(padding) + _VERSION.pack(version)


def decode_file_info(data: bytes) -> dict[bytes, bytes]:
    if data[: len(_FILE_INFO_MAGIC)] != _FILE_INFO_MAGIC:
        raise DataLossError("the HFile file info block has no PBUF magic", field="hfile")
    message, end = _delimited(data, len(_FILE_INFO_MAGIC), "file info")
    if end != len(data):
        raise DataLossError(
            f"the HFile file info block has {len(data) - end} bytes after its entries",
            field="hfile",
        )
    info = _parse(InfoProto(), message, "file info")
    return {entry.first: entry.second for entry in info.map_entry}


def encode_file_info(entries: Mapping[bytes, bytes]) -> bytes:
    info = InfoProto(map_entry=[BytesBytesPair(first=k, second=v) for k, v in entries.items()])
    message = info.SerializeToString()
    return _FILE_INFO_MAGIC + _varint(len(message)) + message
