"""Data blocks: the records a deltacommit appends, in the writer schema of its SCHEMA header.

An Avro data block (what Hudi's Spark writer writes by default) holds the content version
3, the record count and each record as its length and its Avro binary datum, meta columns
included, uncompressed. A Parquet data block (``hoodie.logfile.data.block.format=parquet``)
holds a whole Parquet file: compressed by column, so the meta columns' repeated values
(commit time, partition path, file id) cost next to nothing. Both headers are INSTANT_TIME
then SCHEMA.
"""

from __future__ import annotations

import bisect
import functools
import io
import json
import struct
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, cast

import fastavro
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tidemark.errors import InvalidArgumentError
from tidemark.table.logfiles.framing import CONTENT_VERSION, BlockType, HeaderKey, LogBlock
from tidemark.table.records.keys import RECORD_KEY
from tidemark.table.records.schema import avro_to_arrow_schema

__all__ = [
    "AVRO",
    "DEFAULT_LOG_BLOCK_FORMAT",
    "LOG_BLOCK_FORMATS",
    "MENTIONED_AT_MOST",
    "PARQUET",
    "arrow_records",
    "avro_data_block",
    "avro_records",
    "data_block",
    "data_block_table",
    "parquet_data_block",
]

_INT = struct.Struct(">i")
_DATA_BLOCKS = (BlockType.AVRO_DATA, BlockType.PARQUET_DATA)
MENTIONED_AT_MOST = 256
"""``avro_records`` searches a block's bytes for at most this many strings (a lookup's
keys); past it, decoding every record costs less than the searches."""
_SCHEMAS_KEPT = 64
"""Writer schemas kept parsed (Avro and Arrow) per process: every block a table's writes
append carries the same SCHEMA header, and a merged read decodes many blocks."""
AVRO = "avro"
PARQUET = "parquet"
LOG_BLOCK_FORMATS = (AVRO, PARQUET)
"""Values of ``hoodie.logfile.data.block.format`` a writer takes."""
DEFAULT_LOG_BLOCK_FORMAT = PARQUET
"""Parquet: a batch's log files are about 3.9x smaller than as Avro (issue 49's measure:
1.8x the batch's own Parquet size against 7.1x); Hudi's readers and hudi-rs 0.5 read
them (docs/merge-on-read.md#performance)."""
PARQUET_BLOCK_COMPRESSION = "zstd"
"""Hudi takes ``hoodie.parquet.compression.codec`` for its Parquet blocks; zstd is the
smallest of the codecs Hudi and hudi-rs both read."""


def data_block(block_format: str, instant: str, schema_json: str, rows: pa.Table) -> LogBlock:
    """A data block of ``rows`` (meta columns included) in ``block_format``."""
    if block_format == PARQUET:
        return parquet_data_block(instant, schema_json, rows)
    return avro_data_block(instant, schema_json, arrow_records(rows))


def avro_data_block(
    instant: str, schema_json: str, records: Iterable[Mapping[str, Any]]
) -> LogBlock:
    """An Avro data block of ``records`` (meta columns included) in ``schema_json``."""
    schema = _parsed_schema(schema_json)
    data = [_datum(schema, record) for record in records]
    content = b"".join(
        [
            _INT.pack(CONTENT_VERSION),
            _INT.pack(len(data)),
            *(_INT.pack(len(datum)) + datum for datum in data),
        ]
    )
    return LogBlock(BlockType.AVRO_DATA, _header(instant, schema_json), content)


def arrow_records(rows: pa.Table) -> list[dict[str, Any]]:
    """``rows`` as the Python values an Avro data block is written from: Arrow gives a map
    as a list of (key, value) pairs, Avro takes a dict."""
    records: list[dict[str, Any]] = rows.to_pylist()
    convert = _to_avro(pa.struct(list(rows.schema)))
    return records if convert is None else [convert(record) for record in records]


def _to_avro(kind: pa.DataType) -> Callable[[Any], Any] | None:
    """How a value of ``kind`` becomes what fastavro writes; None when as Arrow gives it."""
    if pa.types.is_map(kind):
        item = _to_avro(kind.item_type) or (lambda value: value)
        return lambda pairs: None if pairs is None else {key: item(v) for key, v in pairs}
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        element = _to_avro(kind.value_type)
        if element is None:
            return None
        return lambda values: None if values is None else [element(v) for v in values]
    if pa.types.is_struct(kind):
        converted = {
            field.name: conversion
            for field in kind
            if (conversion := _to_avro(field.type)) is not None
        }
        if not converted:
            return None
        return lambda record: (
            None
            if record is None
            else {
                name: converted[name](value) if name in converted else value
                for name, value in record.items()
            }
        )
    return None


def avro_records(
    block: LogBlock, mentioning: Collection[str] | None = None
) -> list[dict[str, Any]]:
    """The records of an Avro data block, decoded with its SCHEMA header. With
    ``mentioning`` (at most ``MENTIONED_AT_MOST`` strings, such as record keys), only the
    records whose encoded bytes hold one of them (an Avro string is its UTF-8 bytes, so
    every record having one as a value is among them): the others are not decoded."""
    block.check_type(BlockType.AVRO_DATA)
    schema = _parsed_schema(_schema_of(block))
    count, content = block.versioned_content()
    spans = _record_spans(block, count, content)
    after = len(content) - (spans[-1][2] if spans else 0)
    if mentioning is not None and len(mentioning) <= MENTIONED_AT_MOST:
        spans = _mentioned(spans, content, mentioning)
    records: list[dict[str, Any]] = []
    for index, start, end in spans:
        stream = io.BytesIO(content[start:end])
        try:
            records.append(cast(dict[str, Any], fastavro.schemaless_reader(stream, schema, None)))
        except (EOFError, ValueError) as error:
            raise block.damaged(f"record {index}: {error}") from error
        if stream.tell() != end - start:
            raise block.damaged(f"record {index} is not {end - start} bytes long")
    if after:
        raise block.damaged(f"{after} bytes after its {count} records")
    return records


def _record_spans(block: LogBlock, count: int, content: bytes) -> list[tuple[int, int, int]]:
    """(index, start, end) of each record's datum in ``content``, by their i32 lengths."""
    spans = []
    position = 0
    for index in range(count):
        if len(content) - position < _INT.size:
            raise block.damaged(f"{count} records announced, {index} found")
        (size,) = _INT.unpack_from(content, position)
        position += _INT.size
        if size < 0 or position + size > len(content):
            raise block.damaged(f"record {index} is not {size} bytes long")
        spans.append((index, position, position + size))
        position += size
    return spans


def _mentioned(
    spans: list[tuple[int, int, int]], content: bytes, mentioning: Collection[str]
) -> list[tuple[int, int, int]]:
    """The ``spans`` whose bytes hold one of ``mentioning`` (each searched on its own over
    the whole content, every occurrence)."""
    starts = [start for _, start, _ in spans]
    found: set[int] = set()
    for text in mentioning:
        needle = text.encode()
        at = content.find(needle)
        while at >= 0:
            span = spans[bisect.bisect_right(starts, at) - 1]
            if at + len(needle) <= span[2]:
                found.add(span[0])
            at = content.find(needle, at + 1)
    return [span for span in spans if span[0] in found]


def parquet_data_block(instant: str, schema_json: str, rows: pa.Table) -> LogBlock:
    """A Parquet data block of ``rows`` (meta columns included). Without column statistics
    or pyarrow's copy of the schema in the footer: the SCHEMA header says what the rows
    are, and a log block is always read whole (a footer would cost more than the rows of
    a small block)."""
    buffer = io.BytesIO()
    pq.write_table(
        rows,
        buffer,
        compression=PARQUET_BLOCK_COMPRESSION,
        write_statistics=False,
        store_schema=False,
    )
    return LogBlock(BlockType.PARQUET_DATA, _header(instant, schema_json), buffer.getvalue())


def data_block_table(block: LogBlock, mentioning: Collection[str] | None = None) -> pa.Table:
    """A data block's records as Arrow, typed by its SCHEMA header; with ``mentioning``,
    at least the records holding one of those strings (``avro_records``; a Parquet block's
    records only if one of them is a record key there)."""
    block.check_type(*_DATA_BLOCKS)
    schema = _arrow_schema(_schema_of(block))
    if block.block_type == BlockType.PARQUET_DATA:
        return _parquet_records(block, schema, mentioning)
    return pa.Table.from_pylist(avro_records(block, mentioning), schema=schema)


def _parquet_records(
    block: LogBlock, schema: pa.Schema, mentioning: Collection[str] | None
) -> pa.Table:
    """A Parquet block's records; with ``mentioning`` record keys, none unless the block
    holds one of them, found by decoding its key column alone on the caller's thread (a
    lookup's keys are in few of a slice's blocks; a 125-row block's key column decodes in
    about 35 us, the whole block in 300 us)."""
    stored = pq.ParquetFile(pa.BufferReader(block.content))
    if mentioning is not None and RECORD_KEY in stored.schema_arrow.names:
        keys = stored.read(columns=[RECORD_KEY], use_threads=False).column(RECORD_KEY)
        wanted = pa.array(list(mentioning), pa.string())
        if not pc.any(pc.is_in(keys, value_set=wanted)).as_py():
            return schema.empty_table()
    return stored.read().cast(schema)


def _datum(schema: Any, record: Mapping[str, Any]) -> bytes:
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, schema, dict(record))
    return buffer.getvalue()


def _header(instant: str, schema_json: str) -> dict[HeaderKey, str]:
    return {HeaderKey.INSTANT_TIME: instant, HeaderKey.SCHEMA: schema_json}


@functools.lru_cache(maxsize=_SCHEMAS_KEPT)
def _arrow_schema(schema_json: str) -> pa.Schema:
    return avro_to_arrow_schema(schema_json)


@functools.lru_cache(maxsize=_SCHEMAS_KEPT)
def _parsed_schema(schema_json: str) -> Any:
    try:
        return fastavro.parse_schema(json.loads(schema_json))
    except (ValueError, fastavro.schema.SchemaParseException) as error:
        raise InvalidArgumentError(f"not an Avro schema: {error}", field="schema") from error


def _schema_of(block: LogBlock) -> str:
    schema = block.header.get(HeaderKey.SCHEMA)
    if schema is None:
        raise block.damaged("no SCHEMA header")
    return schema
