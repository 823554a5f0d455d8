"""Ways to damage a stored file, for the damaged-file tests."""

from __future__ import annotations

import zlib
from pathlib import Path

from tidemark.index.shard_file import _TRAILER_BODY, TRAILER_SIZE


def truncate(path: Path) -> None:
    """Keep the first half of the file, as a copy cut short would."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def flip_bit(path: Path, offset: int) -> None:
    """Flip the lowest bit of the byte at ``offset``."""
    data = bytearray(path.read_bytes())
    data[offset] ^= 1
    path.write_bytes(bytes(data))


def wrong_section_checksum(path: Path) -> None:
    """Change the filter section's CRC in a shard file's trailer and give the trailer a
    valid CRC of its own: only the section's checksum is wrong."""
    data = bytearray(path.read_bytes())
    start = len(data) - TRAILER_SIZE
    fields = list(_TRAILER_BODY.unpack_from(data, start))
    fields[9] ^= 0xFFFF  # magic, version, flags, meta offset, 4 lengths, then the filter CRC
    body = _TRAILER_BODY.pack(*fields)
    data[start : start + len(body)] = body
    data[start + len(body) : start + len(body) + 4] = zlib.crc32(body).to_bytes(4, "little")
    path.write_bytes(bytes(data))
