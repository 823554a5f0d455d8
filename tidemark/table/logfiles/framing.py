"""Log blocks as Hudi frames them in a log file (log format version 1, big-endian):

``#HUDI#``, i64 block length (what follows it), i32 format version, i32 block type,
header, i64 content length, content, footer, i64 reverse pointer (block length + 6).
A header or footer is an i32 count, then per entry an i32 key, an i32 length and the UTF-8
value; Hudi writes empty footers.

A writer killed mid-block leaves a block that runs past the end of the file, or whose
reverse pointer does not match its length, or that no magic follows. Hudi reads such a
region as a corrupt block reaching to the next magic (or the end) and goes on after it; so
does ``read_blocks``. Bytes that do not start with the magic where a block should begin are
damage, not a crash's trace, and raise DataLossError.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import BinaryIO, TypeVar

from tidemark.errors import AlreadyExistsError, DataLossError, InvalidArgumentError
from tidemark.storage.base import Storage

__all__ = [
    "CONTENT_VERSION",
    "FORMAT_VERSION",
    "MAGIC",
    "BlockType",
    "HeaderKey",
    "LogBlock",
    "append_blocks",
    "encode_block",
    "read_blocks",
    "read_log_file",
    "write_log_file",
]

MAGIC = b"#HUDI#"
FORMAT_VERSION = 1
CONTENT_VERSION = 3
"""The version leading Avro data and delete block contents, the only one Hudi writes
since 0.x and hudi-rs reads."""
_LONG = struct.Struct(">q")
_INT = struct.Struct(">i")
_FIXED_FIELDS = 2 * _INT.size + 2 * _LONG.size
"""Format version, block type, content length and reverse pointer."""
_Enum = TypeVar("_Enum", bound=enum.IntEnum)


class BlockType(enum.IntEnum):
    COMMAND = 0
    DELETE = 1
    CORRUPT = 2
    AVRO_DATA = 3
    HFILE_DATA = 4
    PARQUET_DATA = 5
    CDC_DATA = 6


class HeaderKey(enum.IntEnum):
    INSTANT_TIME = 0
    TARGET_INSTANT_TIME = 1
    SCHEMA = 2
    COMMAND_BLOCK_TYPE = 3
    COMPACTED_BLOCK_TIMES = 4
    RECORD_POSITIONS = 5
    BLOCK_IDENTIFIER = 6
    IS_PARTIAL = 7
    BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS = 8


@dataclass(frozen=True)
class LogBlock:
    """One block. Header entries are written in the mapping's order (Hudi's own order
    varies from file to file: it comes from a Java HashMap). A corrupt block read from a
    file has no header and holds the bytes from after its magic to the next magic."""

    block_type: BlockType
    header: Mapping[HeaderKey, str]
    content: bytes = b""
    footer: Mapping[HeaderKey, str] = field(default_factory=dict)
    offset: int = field(default=-1, compare=False)
    """Where the block's magic starts in the file it was read from (-1: not read)."""

    @property
    def instant(self) -> str:
        """The instant that wrote the block (its INSTANT_TIME header)."""
        try:
            return self.header[HeaderKey.INSTANT_TIME]
        except KeyError:
            raise DataLossError(
                f"the {self.block_type.name} block at {self.offset} has no INSTANT_TIME",
                field="log_block",
            ) from None

    def check_type(self, *types: BlockType) -> None:
        """InvalidArgumentError unless the block is one of ``types``."""
        if self.block_type not in types:
            wanted = " or ".join(kind.name for kind in types)
            raise InvalidArgumentError(
                f"a {self.block_type.name} block is not {wanted}", field="log_block"
            )

    def damaged(self, what: str) -> DataLossError:
        return DataLossError(
            f"the {self.block_type.name} block at {self.offset}: {what}", field="log_block"
        )

    def versioned_content(self) -> tuple[int, bytes]:
        """The i32 after the content version (a record count, a length) and the bytes after
        it, from an Avro data or delete block."""
        if len(self.content) < 2 * _INT.size:
            raise self.damaged(f"{len(self.content)} bytes of content")
        version, value = struct.unpack_from(">ii", self.content)
        if version != CONTENT_VERSION:
            raise InvalidArgumentError(
                f"block content version {version} at {self.offset} is not supported "
                f"(only {CONTENT_VERSION})",
                field="log_block",
            )
        return int(value), self.content[2 * _INT.size :]


def encode_block(block: LogBlock) -> bytes:
    if block.block_type == BlockType.CORRUPT:
        raise InvalidArgumentError("a corrupt block is never written", field="block_type")
    header = _encode_metadata(block.header)
    footer = _encode_metadata(block.footer)
    length = _FIXED_FIELDS + len(header) + len(block.content) + len(footer)
    return b"".join(
        (
            MAGIC,
            _LONG.pack(length),
            _INT.pack(FORMAT_VERSION),
            _INT.pack(block.block_type),
            header,
            _LONG.pack(len(block.content)),
            block.content,
            footer,
            _LONG.pack(length + len(MAGIC)),
        )
    )


def append_blocks(stream: BinaryIO, blocks: Iterable[LogBlock]) -> int:
    """Write ``blocks`` at the stream's position, one after another; the bytes written."""
    written = 0
    for block in blocks:
        written += stream.write(encode_block(block))
    return written


def read_blocks(data: bytes) -> list[LogBlock]:
    """Every block of a log file's bytes, corrupt ones included, in file order."""
    return list(_iter_blocks(data))


def write_log_file(storage: Storage, path: str, blocks: Iterable[LogBlock]) -> int:
    """A new log file holding ``blocks``; its size. A log file is written once: an existing
    one raises AlreadyExistsError (the writer takes the next version instead)."""
    data = b"".join(encode_block(block) for block in blocks)
    if not storage.create_if_absent(path, data):
        raise AlreadyExistsError(f"the log file {path} exists", field="log_file")
    return len(data)


def read_log_file(storage: Storage, path: str) -> list[LogBlock]:
    return read_blocks(storage.read(path))


def _iter_blocks(data: bytes) -> Iterator[LogBlock]:
    position = 0
    while len(data) - position >= len(MAGIC):
        if data[position : position + len(MAGIC)] != MAGIC:
            raise DataLossError(f"no log block magic at {position}", field="log_file")
        start = position + len(MAGIC)
        end = _block_end(data, start)
        if end is None:
            end = data.find(MAGIC, start)
            end = len(data) if end < 0 else end
            yield LogBlock(BlockType.CORRUPT, {}, data[start:end], offset=position)
        else:
            yield _decode_block(data[start + _LONG.size : end], position)
        position = end


def _block_end(data: bytes, start: int) -> int | None:
    """Where a block whose length field is at ``start`` ends, or None when it is corrupt
    (Hudi's test: the length fits the file, the reverse pointer agrees, and the magic or
    the end of the file follows)."""
    if len(data) - start < _LONG.size:
        return None
    (length,) = _LONG.unpack_from(data, start)
    end = start + _LONG.size + length
    if length < _FIXED_FIELDS or end > len(data):
        return None
    (reverse,) = _LONG.unpack_from(data, end - _LONG.size)
    if reverse - len(MAGIC) != length:
        return None
    following = data[end : end + len(MAGIC)]
    if len(following) == len(MAGIC) and following != MAGIC:
        return None
    return end


def _decode_block(body: bytes, offset: int) -> LogBlock:
    """A block from its bytes after the length field (reverse pointer included)."""
    reader = _Reader(body, offset)
    version = reader.read_int()
    if version != FORMAT_VERSION:
        raise InvalidArgumentError(
            f"log format version {version} at {offset} is not supported (only "
            f"{FORMAT_VERSION}, which every table version 6 and later writes)",
            field="log_file",
        )
    block_type = reader.read_enum(BlockType, "block type")
    header = reader.metadata()
    content = reader.take(reader.read_long())
    footer = reader.metadata()
    reader.read_long()
    if reader.remaining:
        raise DataLossError(
            f"{reader.remaining} unread bytes in the log block at {offset}", field="log_file"
        )
    return LogBlock(block_type, header, content, footer, offset=offset)


def _encode_metadata(metadata: Mapping[HeaderKey, str]) -> bytes:
    parts = [_INT.pack(len(metadata))]
    for key, value in metadata.items():
        encoded = value.encode()
        parts += [_INT.pack(key), _INT.pack(len(encoded)), encoded]
    return b"".join(parts)


class _Reader:
    """Reads a block's fields; a length that runs past the block is damage."""

    def __init__(self, data: bytes, offset: int) -> None:
        self._data = data
        self._position = 0
        self._offset = offset

    @property
    def remaining(self) -> int:
        return len(self._data) - self._position

    def take(self, size: int) -> bytes:
        if size < 0 or size > self.remaining:
            raise DataLossError(
                f"a length of {size} runs past the log block at {self._offset}",
                field="log_file",
            )
        chunk = self._data[self._position : self._position + size]
        self._position += size
        return chunk

    def read_int(self) -> int:
        value: int = _INT.unpack(self.take(_INT.size))[0]
        return value

    def read_long(self) -> int:
        value: int = _LONG.unpack(self.take(_LONG.size))[0]
        return value

    def read_enum(self, kind: type[_Enum], what: str) -> _Enum:
        value = self.read_int()
        try:
            return kind(value)
        except ValueError:
            raise DataLossError(
                f"unknown {what} {value} in the log block at {self._offset}", field="log_file"
            ) from None

    def metadata(self) -> dict[HeaderKey, str]:
        entries = {}
        for _ in range(self.read_int()):
            key = self.read_enum(HeaderKey, "header key")
            entries[key] = self.take(self.read_int()).decode()
        return entries
