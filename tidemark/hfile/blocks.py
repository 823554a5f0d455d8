"""HFile blocks: the 33-byte header, the codec (NONE or GZ) and the checksums.

Every block but the trailer is ``[magic][on-disk size without header][uncompressed size
without header][previous block of the same type][checksum type][bytes per checksum][on-disk
data size with header][data][checksums]``, one 4-byte checksum per ``bytes_per_checksum``
(16 KiB) chunk of header and data. HBase (Hudi 1.0) writes CRC32C checksums; Hudi 1.1's own
writer writes checksum type NULL with the same number of zero bytes. GZ is a gzip member
with a zero header (no name, no time, OS 0: Java's ``GZIPOutputStream``) around a deflate
stream at zlib's default level, which Python's zlib reproduces byte for byte.
"""

from __future__ import annotations

import enum
import struct
import zlib
from dataclasses import dataclass

import google_crc32c

from tidemark.errors import DataLossError, InvalidArgumentError

__all__ = ["Block", "ChecksumType", "Codec", "Magic", "decode_block", "encode_block"]

HEADER = struct.Struct(">8siiqBii")
BYTES_PER_CHECKSUM = 16 * 1024
_CHECKSUM = struct.Struct(">I")
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x00"
_GZIP_TAIL = struct.Struct("<II")


class Magic(bytes, enum.Enum):
    """The block types Hudi writes."""

    DATA = b"DATABLK*"
    META = b"METABLKc"
    ROOT_INDEX = b"IDXROOT2"
    FILE_INFO = b"FILEINF2"


class Codec(enum.IntEnum):
    """The trailer's compression codec (HBase's ordinals; LZO=0 is not supported)."""

    GZ = 1
    NONE = 2


class ChecksumType(enum.IntEnum):
    NULL = 0
    CRC32 = 1
    CRC32C = 2


@dataclass(frozen=True)
class Block:
    """One block as read: its uncompressed data and where it sits."""

    magic: Magic
    offset: int
    size: int
    """On disk, header and checksums included."""
    previous_offset: int
    data: bytes


def _checksum(kind: ChecksumType, chunk: bytes) -> int:
    if kind is ChecksumType.CRC32C:
        return int(google_crc32c.value(chunk))
    if kind is ChecksumType.CRC32:
        return zlib.crc32(chunk)
    return 0


def _checksums(kind: ChecksumType, covered: bytes, per_chunk: int) -> bytes:
    return b"".join(
        _CHECKSUM.pack(_checksum(kind, covered[start : start + per_chunk]))
        for start in range(0, len(covered), per_chunk)
    )


def _compress(codec: Codec, data: bytes) -> bytes:
    if codec is Codec.NONE:
        return data
    deflate = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -zlib.MAX_WBITS)
    stream = deflate.compress(data) + deflate.flush()
    return _GZIP_HEADER + stream + _GZIP_TAIL.pack(zlib.crc32(data), len(data) & 0xFFFFFFFF)


def _decompress(codec: Codec, data: bytes, size: int, offset: int) -> bytes:
    if codec is Codec.NONE:
        raw = data
    else:
        try:
            raw = zlib.decompress(data, 16 + zlib.MAX_WBITS)
        except zlib.error as error:
            raise DataLossError(f"the HFile block at {offset}: {error}", field="hfile") from None
    if len(raw) != size:
        raise DataLossError(
            f"the HFile block at {offset} holds {len(raw)} bytes, its header says {size}",
            field="hfile",
        )
    return raw


def encode_block(
    magic: Magic,
    data: bytes,
    *,
    codec: Codec,
    checksum: ChecksumType,
    previous_offset: int = -1,
) -> bytes:
    stored = _compress(codec, data)
    with_header = HEADER.size + len(stored)
    checksum_size = -(-with_header // BYTES_PER_CHECKSUM) * _CHECKSUM.size
    header = HEADER.pack(
        magic.value,
        len(stored) + checksum_size,
        len(data),
        previous_offset,
        checksum,
        BYTES_PER_CHECKSUM,
        with_header,
    )
    return header + stored + _checksums(checksum, header + stored, BYTES_PER_CHECKSUM)


def decode_block(file: bytes, offset: int, codec: Codec, *expected: Magic) -> Block:
    """The block at ``offset``, its checksums checked; DataLossError when it is damaged."""
    if offset < 0 or offset + HEADER.size > len(file):
        raise DataLossError(f"no HFile block header fits at {offset}", field="hfile")
    magic_bytes, on_disk, size, previous, kind, per_checksum, with_header = HEADER.unpack_from(
        file, offset
    )
    try:
        magic = Magic(magic_bytes)
    except ValueError:
        raise DataLossError(
            f"the HFile block at {offset} has magic {magic_bytes!r}", field="hfile"
        ) from None
    if expected and magic not in expected:
        wanted = " or ".join(repr(each.value) for each in expected)
        raise DataLossError(
            f"the HFile block at {offset} is {magic.value!r}, not {wanted}", field="hfile"
        )
    end = offset + HEADER.size + on_disk
    if not HEADER.size <= with_header <= HEADER.size + on_disk or end > len(file):
        raise DataLossError(f"the HFile block at {offset} has impossible sizes", field="hfile")
    try:
        checksum = ChecksumType(kind)
    except ValueError:
        raise InvalidArgumentError(
            f"the HFile block at {offset} has checksum type {kind}", field="hfile"
        ) from None
    covered = file[offset : offset + with_header]
    if checksum is not ChecksumType.NULL:
        if per_checksum <= 0:
            raise DataLossError(
                f"the HFile block at {offset} has {per_checksum} bytes per checksum",
                field="hfile",
            )
        if file[offset + with_header : end] != _checksums(checksum, covered, per_checksum):
            raise DataLossError(
                f"the HFile block at {offset} fails its {checksum.name} checksum", field="hfile"
            )
    data = _decompress(codec, covered[HEADER.size :], size, offset)
    return Block(magic, offset, end - offset, previous, data)
