"""The two layouts of Hudi's HFile writers and the options a file is written with."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from tidemark.hfile.blocks import ChecksumType, Codec
from tidemark.hfile.trailer import COMPARATOR

__all__ = ["DEFAULT_BLOCK_SIZE", "Style", "WriteOptions"]

DEFAULT_BLOCK_SIZE = 1024 * 1024
"""Hudi's ``hoodie.hfile.block.size``."""


class Style(enum.Enum):
    """Which of Hudi's two HFile writers made a file; each lays the same format out a
    little differently, and the writer repeats either."""

    HBASE = "hbase"
    """Hudi 1.0 and before, through HBase 2.4: CRC32C checksums, version 3.3, each block
    naming the previous block of its type, the trailer's total uncompressed bytes."""
    HUDI = "hudi"
    """Hudi 1.1's own writer (hudi-io): checksum type NULL (zero checksum bytes), version
    3.0, no previous-block links, the data's uncompressed size as the index's."""

    @property
    def checksum(self) -> ChecksumType:
        return ChecksumType.CRC32C if self is Style.HBASE else ChecksumType.NULL

    @property
    def minor_version(self) -> int:
        return 3 if self is Style.HBASE else 0


@dataclass(frozen=True)
class WriteOptions:
    style: Style = Style.HUDI
    codec: Codec = Codec.GZ
    block_size: int = DEFAULT_BLOCK_SIZE
    comparator: str = COMPARATOR
    """The trailer's comparator class: Hudi's metadata table always names its own."""
