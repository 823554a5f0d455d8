"""Arrow IPC payloads in ``bytes`` fields of gRPC messages.

Batches of keys and their locations travel as Arrow IPC streams rather than repeated
protobuf fields: encoding and decoding 100k keys costs about a millisecond, where
building and parsing a repeated string field of them costs tens of milliseconds in
Python. A payload that is not an Arrow IPC stream is an InvalidArgumentError naming its
field.

A stream's record batches may be compressed (LZ4, zstd): a few hundred kilobytes can
decode to gigabytes. Before anything is decoded, the size each batch will take once
decoded is read from its metadata (the buffer lengths, and for a compressed buffer the
uncompressed length its body starts with) and the stream refused past ``max_bytes``.
"""

from __future__ import annotations

import struct

import pyarrow as pa

from tidemark.errors import InvalidArgumentError


def encode(table: pa.Table) -> bytes:
    """``table`` as an Arrow IPC stream (its chunks as record batches, no copy of them)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def decode(payload: bytes, *, field: str, max_bytes: int) -> pa.Table:
    """The table in an Arrow IPC stream; zero-copy over ``payload``. Fully validated
    (offsets inside their buffers, valid UTF-8) before anything reads it, so a damaged
    payload is refused instead of read out of bounds; one that would decode to more than
    ``max_bytes`` is refused before it is decoded."""
    if not payload:
        raise InvalidArgumentError("must be an Arrow IPC stream, got no bytes", field=field)
    try:
        size = decoded_size(payload)
        if size > max_bytes:
            raise InvalidArgumentError(
                f"would decode to {size} bytes, over the limit of {max_bytes}", field=field
            )
        table = pa.ipc.open_stream(payload).read_all()
        table.validate(full=True)
    except (pa.ArrowInvalid, OSError, struct.error, IndexError) as error:
        raise InvalidArgumentError(f"is not an Arrow IPC stream: {error}", field=field) from None
    return table


def column(table: pa.Table, name: str, *, field: str) -> pa.Array:
    """The string column ``name`` of a decoded payload as one array (utf8 or large_utf8,
    dictionary-encoded ones decoded); a missing or non-string column names the field."""
    if name not in table.column_names:
        raise InvalidArgumentError(
            f"has no column {name!r} (columns: {', '.join(table.column_names) or 'none'})",
            field=field,
        )
    values = table[name].combine_chunks()
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        raise InvalidArgumentError(
            f"column {name!r} must be strings, got {values.type}", field=field
        )
    return values


MESSAGE_HEADER = 2
"""Field of the Message table holding its header (flatbuffers, Arrow's Message.fbs)."""
MESSAGE_HEADER_TYPE = 1
DICTIONARY_BATCH, RECORD_BATCH = 2, 3
"""Header types of the messages that carry buffers."""
DICTIONARY_DATA = 1
BATCH_BUFFERS, BATCH_COMPRESSION = 2, 3
UNCOMPRESSED = -1
"""A compressed body's buffer prefix meaning "stored as is"."""


def decoded_size(payload: bytes) -> int:
    """The bytes the stream's batches take once decoded, from their metadata alone."""
    reader = pa.ipc.MessageReader.open_stream(pa.py_buffer(payload))
    total = 0
    while True:
        try:
            message = reader.read_next_message()
        except StopIteration:
            return total
        total += _message_size(message.metadata.to_pybytes(), message.body)


def _message_size(metadata: bytes, body: pa.Buffer | None) -> int:
    message = _root(metadata)
    kind = _scalar(metadata, message, MESSAGE_HEADER_TYPE, "<B")
    if kind not in (DICTIONARY_BATCH, RECORD_BATCH):
        return 0
    batch = _table_field(metadata, message, MESSAGE_HEADER)
    if kind == DICTIONARY_BATCH:
        batch = _table_field(metadata, batch, DICTIONARY_DATA)
    buffers = _vector(metadata, batch, BATCH_BUFFERS, 16)
    compressed = _field_position(metadata, batch, BATCH_COMPRESSION) is not None
    data = body.to_pybytes() if body is not None and compressed else b""
    total = 0
    for position in buffers:
        offset, length = struct.unpack_from("<qq", metadata, position)
        if compressed and length >= 8:
            (decoded,) = struct.unpack_from("<q", data, offset)
            total += length - 8 if decoded == UNCOMPRESSED else decoded
        elif not compressed:
            total += length
    return total


def _root(data: bytes) -> int:
    (offset,) = struct.unpack_from("<I", data, 0)
    return int(offset)


def _field_position(data: bytes, table: int, field: int) -> int | None:
    """Where field ``field`` of the flatbuffer table at ``table`` is, None if absent."""
    (back,) = struct.unpack_from("<i", data, table)
    vtable = table - back
    (vtable_size,) = struct.unpack_from("<H", data, vtable)
    entry = 4 + 2 * field
    if entry >= vtable_size:
        return None
    (offset,) = struct.unpack_from("<H", data, vtable + entry)
    return table + offset if offset else None


def _scalar(data: bytes, table: int, field: int, layout: str) -> int:
    position = _field_position(data, table, field)
    return 0 if position is None else int(struct.unpack_from(layout, data, position)[0])


def _table_field(data: bytes, table: int, field: int) -> int:
    position = _field_position(data, table, field)
    if position is None:
        raise pa.ArrowInvalid("batch message without its header")
    (offset,) = struct.unpack_from("<I", data, position)
    return position + int(offset)


def _vector(data: bytes, table: int, field: int, element_size: int) -> list[int]:
    """Positions of the elements of a vector of structs."""
    position = _field_position(data, table, field)
    if position is None:
        return []
    (offset,) = struct.unpack_from("<I", data, position)
    start = position + int(offset)
    (count,) = struct.unpack_from("<I", data, start)
    return [start + 4 + index * element_size for index in range(count)]
