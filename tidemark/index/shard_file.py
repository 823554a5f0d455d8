"""The shard file: an immutable, sorted, HFile-like map of record key -> location code.

Layout (byte-exact description in docs/record-index.md)::

    data block 0 | data block 1 | ... | block index | filter | locations | file info | trailer

* Data blocks hold ~64 KiB of sorted entries, zstd-compressed, each with a CRC-32 kept in
  the block index. A block whose keys are all canonical lowercase UUIDs stores each key
  as its 16 raw bytes, as byte planes (all first bytes, then all second bytes, ...), so
  the sorted high bytes compress; other blocks store the keys' common prefix once and the
  suffixes with their lengths. Location codes follow as 1-, 2- or 4-byte integers.
* The block index holds each block's offset, sizes, CRC, entry count and first key.
* The filter is a Bloom filter over a 64-bit hash of every key (fast negatives).
* Locations: the file's dictionary of (partition, file_id, instant) rows as an Arrow IPC
  stream; a row with null partition and file id is a tombstone (a delete).
* File info is JSON (format version, kind, as-of instant, entry count, key range).
* The fixed 64-byte trailer locates the four sections and holds their CRCs and its own.

Every byte is covered by a CRC, so a flipped byte raises ``DataLossError`` when read and
never turns into a wrong answer. Lookups take a sorted batch of keys and work per block
with ``np.searchsorted``; only the blocks the batch touches are read, adjacent ones in one
ranged read. A batch touching half the blocks or more makes the file resident: all its
blocks as one decoded block in the cache, searched with one ``np.searchsorted`` per batch.
"""

from __future__ import annotations

import io
import json
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidemark.errors import DataLossError, InvalidArgumentError
from tidemark.index.block_cache import BlockCache
from tidemark.index.keys import (
    EncodedKeys,
    encode_keys,
    fit,
    hash64,
    matrix_of,
    prefix64,
    sort_order,
    uuid_from_bytes,
)
from tidemark.index.layout import REBUILD
from tidemark.index.wire import LOCATION_COLUMNS
from tidemark.storage.base import Storage
from tidemark.storage.damaged import damaged

FORMAT_VERSION = 1
MAGIC = b"TMRI"
BLOCK_BYTES = 128 << 10
FILTER_BITS_PER_KEY = 8
FILTER_PROBES = 5
RESIDENT_TOUCHED_SHARE = 2
"""A lookup touching at least 1/2 of a file's blocks makes the file resident (reading at
most as many blocks again as it needed)."""
RESIDENT_BUDGET_SHARE = 4
"""A resident file takes at most 1/4 of the block cache."""
DIRECTORY_MIN_ENTRIES = 1 << 16
"""A resident file of this many distinct prefixes or more is searched through a
directory of prefix buckets (smaller ones fit the CPU caches: ``np.searchsorted``)."""
DIRECTORY_BUCKET_ENTRIES = 32
FILTER_MAX_KEYS_PER_BLOCK = 2
"""The filter is asked only for sparse batches: with more keys per block, nearly every
block is read anyway and searching the negatives costs less than probing the filter."""
ZSTD_LEVEL = 3
TAIL_READ_BYTES = 64 << 10
KIND_BASE = "base"
KIND_DELTA = "delta"

_KEYS_GENERAL = 0
_KEYS_UUID = 1
_TRAILER_BODY = struct.Struct("<4sHHQ4I4IQ")
_TRAILER_END = struct.Struct("<I4s")
TRAILER_SIZE = _TRAILER_BODY.size + _TRAILER_END.size
_BLOCK_HEADER = struct.Struct("<BBBI")
_SECTION_HEADER = struct.Struct("<I")
_FILTER_HEADER = struct.Struct("<BQ")
_CODEC = pa.Codec("zstd", compression_level=ZSTD_LEVEL)


@dataclass(frozen=True)
class ShardInfo:
    """The file info section."""

    format_version: int
    kind: str
    as_of: str
    entries: int
    blocks: int
    min_key: str | None
    max_key: str | None


@dataclass(frozen=True)
class _Directory:
    """Where each bucket of a sorted array of distinct prefixes starts, the buckets being
    their top bits (about 32 prefixes per bucket for uniform keys such as UUIDs). A batch
    is searched with a binary search inside each query's bucket, all queries at once:
    each step is one gather of independent reads, which the CPU overlaps, where
    ``np.searchsorted`` waits on memory at every step of every query once the array
    outgrows the CPU caches."""

    starts: np.ndarray
    shift: np.uint64
    steps: int

    @classmethod
    def of(cls, prefixes: np.ndarray) -> _Directory:
        bits = max(1, (len(prefixes) // DIRECTORY_BUCKET_ENTRIES).bit_length() - 1)
        shift = np.uint64(64 - bits)
        firsts = np.arange(1 << bits, dtype=np.uint64) << shift
        starts = np.append(np.searchsorted(prefixes, firsts), len(prefixes)).astype(np.int64)
        widest = int(np.diff(starts).max())
        return cls(starts, shift, widest.bit_length())

    def search(self, prefixes: np.ndarray, queries: np.ndarray) -> np.ndarray:
        """``np.searchsorted(prefixes, queries, "left")``."""
        bucket = (queries >> self.shift).astype(np.int64)
        low, high = self.starts[bucket], self.starts[bucket + 1]
        last = len(prefixes) - 1
        for _ in range(self.steps):
            middle = (low + high) >> 1
            below = (prefixes[np.minimum(middle, last)] < queries) & (middle < high)
            low = np.where(below, middle + 1, low)
            high = np.where(below, high, middle)
        return low


@dataclass(frozen=True)
class _Block:
    """A decoded data block: sorted keys (``S16`` raw UUIDs or ``S<w>`` UTF-8), their
    ``prefix64`` values (searched first, as integers) and location codes."""

    keys: np.ndarray
    codes: np.ndarray
    prefixes: np.ndarray
    uuid: bool
    shared_prefixes: bool
    """Whether two keys share a prefix (then prefixes alone cannot place a query)."""
    directory: _Directory | None = None
    """Of a resident file's distinct prefixes, when it is large."""

    @property
    def nbytes(self) -> int:
        arrays = [self.keys, self.codes, self.prefixes]
        if self.directory is not None:
            arrays.append(self.directory.starts)
        return sum(int(array.nbytes) for array in arrays) + 128


def _compress(raw: bytes) -> bytes:
    return _SECTION_HEADER.pack(len(raw)) + _CODEC.compress(raw, asbytes=True)


def _decompress(data: bytes, what: str) -> bytes:
    (size,) = _SECTION_HEADER.unpack_from(data)
    raw = _CODEC.decompress(data[_SECTION_HEADER.size :], size, asbytes=True)
    if len(raw) != size:
        raise DataLossError(f"{what} decompresses to {len(raw)} bytes, expected {size}")
    return bytes(raw)


def _code_dtype(dictionary_size: int) -> np.dtype:
    for dtype in (np.uint8, np.uint16):
        if dictionary_size <= np.iinfo(dtype).max + 1:
            return np.dtype(dtype)
    return np.dtype(np.uint32)


def contiguous(values: pa.Array | pa.ChunkedArray, kind: pa.DataType | None = None) -> pa.Array:
    """``values`` as one array (of ``kind`` when given). ``pa.array`` would copy a
    ChunkedArray through Python objects (0.3 s for 400,000 strings: most of a compaction);
    combining its chunks copies buffers."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not isinstance(values, pa.Array):
        return pa.array(values, kind)
    return values if kind is None or values.type == kind else values.cast(kind)


def encode_locations(
    partitions: pa.Array, file_ids: pa.Array, instants: pa.Array
) -> tuple[np.ndarray, pa.Table]:
    """Per-entry codes (uint32) into a dictionary table of distinct (partition, file_id,
    instant) rows. Null partition and file id together mean a tombstone."""
    columns = [contiguous(column, pa.string()) for column in (partitions, file_ids, instants)]
    if columns[2].null_count:
        raise InvalidArgumentError("an instant is null", field="instant")
    if not pc.equal(pc.is_null(columns[0]), pc.is_null(columns[1])).to_numpy(False).all():
        raise InvalidArgumentError(
            "partition and file_id must both be set, or both null for a delete", field="file_id"
        )
    encoded = [pc.dictionary_encode(column, null_encoding="encode") for column in columns]
    indices = [np.asarray(column.indices.to_numpy(False), np.int64) for column in encoded]
    pair = indices[0] * len(encoded[1].dictionary) + indices[1]
    pairs, pair_codes = np.unique(pair, return_inverse=True)
    triple = pair_codes.astype(np.int64) * len(encoded[2].dictionary) + indices[2]
    triples, codes = np.unique(triple, return_inverse=True)
    pair_rows = pairs[triples // len(encoded[2].dictionary)]
    rows = [
        pair_rows // len(encoded[1].dictionary),
        pair_rows % len(encoded[1].dictionary),
        triples % len(encoded[2].dictionary),
    ]
    dictionary = pa.table(
        {
            name: column.dictionary.take(pa.array(row))
            for name, column, row in zip(LOCATION_COLUMNS, encoded, rows, strict=True)
        }
    )
    return codes.astype(np.uint32), dictionary


def _encode_block(
    keys: EncodedKeys, is_uuid: bool, codes: np.ndarray, code_dtype: np.dtype
) -> bytes:
    count = len(keys)
    if is_uuid:
        planes = matrix_of(keys.raw_uuids()).T.tobytes()
        header = _BLOCK_HEADER.pack(_KEYS_UUID, code_dtype.itemsize, 0, count)
        return header + planes + codes.astype(code_dtype).tobytes()
    matrix = matrix_of(keys.values)
    first, last = matrix[0], matrix[-1]
    shortest = int(min(keys.lengths[0], keys.lengths[-1]))
    differing = np.flatnonzero(first[:shortest] != last[:shortest])
    prefix = int(differing[0]) if len(differing) else shortest
    suffix_lengths = keys.lengths - prefix
    length_dtype = np.dtype(np.uint16 if suffix_lengths.max() <= 0xFFFF else np.uint32)
    mask = (np.arange(keys.width) >= prefix) & (np.arange(keys.width) < keys.lengths[:, None])
    header = _BLOCK_HEADER.pack(_KEYS_GENERAL, code_dtype.itemsize, length_dtype.itemsize, count)
    return b"".join(
        [
            header,
            struct.pack("<I", prefix),
            first[:prefix].tobytes(),
            suffix_lengths.astype(length_dtype).tobytes(),
            matrix[mask].tobytes(),
            codes.astype(code_dtype).tobytes(),
        ]
    )


def _decode_block(raw: bytes) -> _Block:
    encoding, code_size, length_size, count = _BLOCK_HEADER.unpack_from(raw)
    position = _BLOCK_HEADER.size
    if encoding == _KEYS_UUID:
        planes = np.frombuffer(raw, np.uint8, 16 * count, position).reshape(16, count)
        keys = np.ascontiguousarray(planes.T).view("S16").ravel()
        position += 16 * count
    else:
        (prefix,) = struct.unpack_from("<I", raw, position)
        position += 4
        prefix_bytes = np.frombuffer(raw, np.uint8, prefix, position)
        position += prefix
        suffix_lengths = np.frombuffer(raw, f"<u{length_size}", count, position).astype(np.int64)
        position += count * length_size
        lengths = suffix_lengths + prefix
        width = max(int(lengths.max()), 1)
        matrix = np.zeros((count, width), np.uint8)
        matrix[:, :prefix] = prefix_bytes
        mask = (np.arange(width) >= prefix) & (np.arange(width) < lengths[:, None])
        total = int(suffix_lengths.sum())
        matrix[mask] = np.frombuffer(raw, np.uint8, total, position)
        position += total
        keys = matrix.view(f"S{width}").ravel()
    codes = np.frombuffer(raw, f"<u{code_size}", count, position)
    prefixes = prefix64(keys)
    shared = bool((prefixes[1:] == prefixes[:-1]).any())
    return _Block(keys, codes, prefixes, encoding == _KEYS_UUID, shared)


def _filter_positions(hashes: np.ndarray, bits: int, probes: int) -> list[np.ndarray]:
    """Double hashing: probe i sets bit ``(h + i * (h >> 32 | 1)) mod bits``."""
    step = (hashes >> np.uint64(32)) | np.uint64(1)
    return [(hashes + np.uint64(probe) * step) % np.uint64(bits) for probe in range(probes)]


def _build_filter(keys: EncodedKeys) -> bytes:
    bits = max(64, -(-len(keys) * FILTER_BITS_PER_KEY // 64) * 64)
    table = np.zeros(bits, bool)
    for positions in _filter_positions(hash64(keys), bits, FILTER_PROBES):
        table[positions] = True
    packed = np.packbits(table, bitorder="little")
    return _FILTER_HEADER.pack(FILTER_PROBES, bits) + packed.tobytes()


def write_shard(
    keys: pa.Array,
    partitions: pa.Array,
    file_ids: pa.Array,
    instants: pa.Array,
    *,
    kind: str = KIND_BASE,
    as_of: str,
    block_bytes: int = BLOCK_BYTES,
) -> bytes:
    """The bytes of a shard file mapping each key to its location (input in any order;
    a duplicate key is refused with InvalidArgumentError(field="key"))."""
    codes, dictionary = encode_locations(partitions, file_ids, instants)
    order = sort_order(keys)
    sorted_keys = encode_keys(contiguous(keys).take(pa.array(order)))
    codes = codes[order]
    if len(sorted_keys) > 1 and (sorted_keys.values[1:] == sorted_keys.values[:-1]).any():
        raise InvalidArgumentError("a key appears twice in one shard file", field="key")
    code_dtype = _code_dtype(len(dictionary))
    sizes = sorted_keys.lengths + code_dtype.itemsize
    block_of = (np.cumsum(sizes) - sizes) // block_bytes
    starts = np.concatenate([[0], np.flatnonzero(np.diff(block_of)) + 1]).astype(np.int64)
    ends = np.append(starts[1:], len(sorted_keys))
    uuids = sorted_keys.uuids()
    parts: list[bytes] = []
    offsets, compressed_sizes, raw_sizes, crcs = [], [], [], []
    offset = 0
    for start, end in zip(starts, ends, strict=True) if len(sorted_keys) else ():
        raw = _encode_block(
            sorted_keys.take(slice(start, end)),
            bool(uuids[start:end].all()),
            codes[start:end],
            code_dtype,
        )
        block = _CODEC.compress(raw, asbytes=True)
        parts.append(block)
        offsets.append(offset)
        compressed_sizes.append(len(block))
        raw_sizes.append(len(raw))
        crcs.append(zlib.crc32(block))
        offset += len(block)
    block_count = len(parts)
    first_keys = sorted_keys.take(starts[:block_count])
    first_offsets = np.concatenate([[0], np.cumsum(first_keys.lengths)]).astype("<u4")
    index = b"".join(
        [
            struct.pack("<I", block_count),
            np.asarray(offsets, "<u8").tobytes(),
            np.asarray(compressed_sizes, "<u4").tobytes(),
            np.asarray(raw_sizes, "<u4").tobytes(),
            np.asarray(crcs, "<u4").tobytes(),
            (ends - starts)[:block_count].astype("<u4").tobytes(),
            first_offsets.tobytes(),
            matrix_of(first_keys.values)[
                np.arange(first_keys.width) < first_keys.lengths[:, None]
            ].tobytes(),
        ]
    )
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, dictionary.schema) as stream:
        stream.write_table(dictionary)
    arrow_keys = sorted_keys.to_arrow()
    info = ShardInfo(
        FORMAT_VERSION,
        kind,
        as_of,
        len(sorted_keys),
        block_count,
        arrow_keys[0].as_py() if len(arrow_keys) else None,
        arrow_keys[-1].as_py() if len(arrow_keys) else None,
    )
    sections = [
        _compress(index),
        _compress(_build_filter(sorted_keys)),
        _compress(sink.getvalue()),
        _compress(json.dumps(info.__dict__).encode()),
    ]
    body = _TRAILER_BODY.pack(
        MAGIC,
        FORMAT_VERSION,
        0,
        offset,
        *(len(section) for section in sections),
        *(zlib.crc32(section) for section in sections),
        len(sorted_keys),
    )
    trailer = body + _TRAILER_END.pack(zlib.crc32(body), MAGIC)
    return b"".join([*parts, *sections, trailer])


def _block_number_type(block_count: int) -> type[np.signedinteger]:
    """The narrowest signed type for block numbers and -1, so sorting them is a radix sort."""
    return np.int16 if block_count < 1 << 15 else np.int64


def _search(block: _Block, queries: np.ndarray, prefixes: np.ndarray) -> np.ndarray:
    """Where each query is or would be in the block's sorted keys (clipped to the last
    index): by integer prefix, and by whole key only where keys share a prefix."""
    if block.directory is not None:
        index = block.directory.search(block.prefixes, prefixes)
    else:
        index = np.searchsorted(block.prefixes, prefixes, "left")
    if block.shared_prefixes:
        shared = np.searchsorted(block.prefixes, prefixes, "right") - index > 1
        index[shared] = _search_keys(block.keys, queries[shared], "left")
    return np.minimum(index, len(block.keys) - 1)


def _search_keys(
    table: np.ndarray, queries: np.ndarray, side: Literal["left", "right"]
) -> np.ndarray:
    """``np.searchsorted`` of whole keys; queries longer than every key are cut one byte
    past the longest, which keeps their order and keeps them unequal."""
    width = table.dtype.itemsize
    queries = fit(queries, min(queries.dtype.itemsize, width + 1))
    width = max(width, queries.dtype.itemsize)
    return np.searchsorted(fit(table, width), fit(queries, width), side)


def _match(
    block: _Block,
    keys: EncodedKeys,
    rows: np.ndarray,
    candidates: np.ndarray,
    found: np.ndarray,
    codes: np.ndarray,
) -> None:
    """Search ``keys[rows]`` in ``block``; mark each hit (at its ``candidates`` position)
    in ``found`` and set its code. A UUID block is searched by the raw bytes of the UUID
    keys only: other keys cannot be in it."""
    if block.uuid:
        rows = rows[keys.uuids()[rows]]
        queries, prefixes = keys.raw_uuids()[rows], keys.raw_prefixes()[rows]
    else:
        queries, prefixes = keys.values[rows], keys.prefixes()[rows]
    index = _search(block, queries, prefixes)
    hit = block.keys[index] == queries
    positions = candidates[rows[hit]]
    found[positions] = True
    codes[positions] = block.codes[index[hit]]


def _concatenate(blocks: list[_Block]) -> _Block:
    """Consecutive blocks of one file as one block: raw UUIDs if every block holds them,
    else every key as text at the widest width."""
    uuid = all(block.uuid for block in blocks)
    if uuid:
        keys = np.concatenate([block.keys for block in blocks])
        prefixes = np.concatenate([block.prefixes for block in blocks])
    else:
        values = [uuid_from_bytes(block.keys) if block.uuid else block.keys for block in blocks]
        width = max(part.dtype.itemsize for part in values)
        keys = np.concatenate([fit(part, width) for part in values])
        prefixes = prefix64(keys)
    codes = np.concatenate([block.codes for block in blocks])
    shared = bool((prefixes[1:] == prefixes[:-1]).any())
    large = len(prefixes) >= DIRECTORY_MIN_ENTRIES and not shared
    return _Block(keys, codes, prefixes, uuid, shared, _Directory.of(prefixes) if large else None)


ReadRange = Callable[[int, int], bytes]


class ShardReader:
    """A shard file opened by its trailer and metadata sections (one or two ranged reads);
    data blocks are read on demand and kept in the block cache."""

    def __init__(self, name: str, size: int, read: ReadRange, cache: BlockCache) -> None:
        self.name = name
        self.size = size
        self._read = read
        self._cache = cache
        if size < TRAILER_SIZE:
            raise self._corrupt(f"{size} bytes is shorter than the trailer")
        tail_start = max(0, size - TAIL_READ_BYTES)
        tail = read(tail_start, size - tail_start)
        trailer = tail[-TRAILER_SIZE:]
        crc, end_magic = _TRAILER_END.unpack_from(trailer, _TRAILER_BODY.size)
        body = trailer[: _TRAILER_BODY.size]
        if end_magic != MAGIC or zlib.crc32(body) != crc:
            raise self._corrupt("bad trailer")
        magic, version, _, meta_offset, *fields = _TRAILER_BODY.unpack(body)
        lengths, crcs, self.entries = fields[:4], fields[4:8], fields[8]
        if magic != MAGIC or version != FORMAT_VERSION:
            raise self._corrupt(f"format version {version}, expected {FORMAT_VERSION}")
        if meta_offset + sum(lengths) + TRAILER_SIZE != size:
            raise self._corrupt("section lengths do not add up to the file size")
        if meta_offset < tail_start:
            tail = read(meta_offset, tail_start - meta_offset) + tail
            tail_start = meta_offset
        sections = []
        position = meta_offset - tail_start
        for what, length, expected in zip(
            ("block index", "filter", "locations", "file info"), lengths, crcs, strict=True
        ):
            section = tail[position : position + length]
            if zlib.crc32(section) != expected:
                raise self._corrupt(f"{what} checksum mismatch")
            sections.append(_decompress(section, what))
            position += length
        self._parse_index(sections[0])
        self._filter_probes, self._filter_bits = _FILTER_HEADER.unpack_from(sections[1])
        self._filter = np.frombuffer(sections[1], np.uint8, offset=_FILTER_HEADER.size)
        self.dictionary = pa.ipc.open_stream(sections[2]).read_all()
        self.info = ShardInfo(**json.loads(sections[3]))
        self.meta_bytes = sum(len(section) for section in sections)
        self._resident_refused = False

    @classmethod
    def open(cls, storage: Storage, path: str, cache: BlockCache) -> ShardReader:
        size = storage.size(path)
        return cls(
            f"{storage.uri}/{path}",
            size,
            lambda start, n: storage.read_range(path, start, n),
            cache,
        )

    @classmethod
    def from_bytes(cls, data: bytes, cache: BlockCache, name: str = "<memory>") -> ShardReader:
        return cls(name, len(data), lambda start, n: data[start : start + n], cache)

    def _corrupt(self, what: str) -> DataLossError:
        return damaged(f"shard file {self.name}", what, REBUILD)

    def _parse_index(self, raw: bytes) -> None:
        (count,) = struct.unpack_from("<I", raw)
        position = 4
        arrays = []
        for dtype in ("<u8", "<u4", "<u4", "<u4", "<u4"):
            arrays.append(np.frombuffer(raw, dtype, count, position).astype(np.int64))
            position += count * np.dtype(dtype).itemsize
        self._offsets, self._sizes, self._raw_sizes, self._crcs, self._counts = arrays
        first_offsets = np.frombuffer(raw, "<u4", count + 1, position).astype(np.int64)
        position += (count + 1) * 4
        first_bytes = np.frombuffer(raw, np.uint8, offset=position)
        lengths = np.diff(first_offsets)
        matrix = np.zeros((count, max(int(lengths.max()) if count else 1, 1)), np.uint8)
        matrix[np.arange(matrix.shape[1]) < lengths[:, None]] = first_bytes
        self._first_keys = matrix.view(f"S{matrix.shape[1]}").ravel()
        self._first_prefixes = prefix64(self._first_keys)

    @property
    def block_count(self) -> int:
        return len(self._offsets)

    def might_contain(self, keys: EncodedKeys) -> np.ndarray:
        """The filter's answer per key: False means certainly absent."""
        result = np.ones(len(keys), bool)
        hashes = hash64(keys)
        for positions in _filter_positions(hashes, self._filter_bits, self._filter_probes):
            byte = self._filter[positions >> np.uint64(3)]
            result &= ((byte >> (positions & np.uint64(7))) & 1) == 1
        return result

    def _blocks(self, ids: np.ndarray) -> dict[int, _Block]:
        """Decoded blocks by id, from the cache or read in runs of adjacent blocks."""
        found: dict[int, _Block] = {}
        missing = []
        for block_id in ids.tolist():
            cached = self._cache.get((self.name, self.size, block_id))
            if cached is None:
                missing.append(block_id)
            else:
                found[block_id] = cached  # type: ignore[assignment]
        if not missing:
            return found
        runs = np.split(np.asarray(missing), np.flatnonzero(np.diff(missing) > 1) + 1)
        for run in runs:
            start = int(self._offsets[run[0]])
            data = self._read(start, int(self._offsets[run[-1]] + self._sizes[run[-1]]) - start)
            for block_id in run.tolist():
                begin = int(self._offsets[block_id]) - start
                compressed = data[begin : begin + int(self._sizes[block_id])]
                if zlib.crc32(compressed) != self._crcs[block_id]:
                    raise self._corrupt(f"block {block_id} checksum mismatch")
                raw = _CODEC.decompress(compressed, int(self._raw_sizes[block_id]), asbytes=True)
                block = _decode_block(raw)
                if len(block.keys) != self._counts[block_id]:
                    raise self._corrupt(f"block {block_id} entry count mismatch")
                self._cache.put((self.name, self.size, block_id), block, block.nbytes)
                found[block_id] = block
        return found

    def _route(self, keys: EncodedKeys) -> np.ndarray:
        """Each sorted key's block: the last whose first key is not greater (-1: before
        the first block). Integer prefixes decide unless a first key shares the prefix."""
        prefixes = keys.prefixes()
        block_of = np.searchsorted(self._first_prefixes, prefixes, "right") - 1
        shared = np.searchsorted(self._first_prefixes, prefixes, "left") <= block_of
        if shared.any():
            block_of[shared] = _search_keys(self._first_keys, keys.values[shared], "right") - 1
        return block_of

    def lookup(
        self, keys: EncodedKeys | pa.Array, *, make_resident: bool = True
    ) -> tuple[np.ndarray, np.ndarray]:
        """For keys in any order (repeats allowed; nearly sorted is fastest): a found mask
        and each found key's location code (an index into ``dictionary``; 0 where not
        found). With the file resident (below) the batch is searched in one vector
        operation; otherwise keys are grouped by block with a radix sort of block numbers
        and each block searches its keys in one vector operation. ``make_resident=False``
        never makes the file resident (a lookup that will not be repeated)."""
        if not isinstance(keys, EncodedKeys):
            keys = encode_keys(keys)
        found = np.zeros(len(keys), bool)
        codes = np.zeros(len(keys), np.uint32)
        if self.block_count == 0 or len(keys) == 0:
            return found, codes
        sparse = len(keys) < FILTER_MAX_KEYS_PER_BLOCK * self.block_count
        candidates = np.flatnonzero(self.might_contain(keys)) if sparse else np.arange(len(keys))
        chosen = keys.take(candidates) if sparse else keys
        resident = self._cache.get(self._resident_key, count_miss=False)
        if resident is None:
            block_of = self._route(chosen)
            by_block = np.argsort(
                block_of.astype(_block_number_type(self.block_count)), kind="stable"
            )
            touched, starts = np.unique(block_of[by_block], return_index=True)
            ends = np.append(starts[1:], len(by_block))
            keep = touched >= 0
            touched, starts, ends = touched[keep], starts[keep], ends[keep]
            if make_resident and RESIDENT_TOUCHED_SHARE * len(touched) >= self.block_count:
                resident = self._make_resident()
        if resident is not None:
            assert isinstance(resident, _Block)
            _match(resident, chosen, np.arange(len(chosen)), candidates, found, codes)
            return found, codes
        blocks = self._blocks(touched)
        for block_id, start, end in zip(
            touched.tolist(), starts.tolist(), ends.tolist(), strict=True
        ):
            _match(blocks[block_id], chosen, by_block[start:end], candidates, found, codes)
        return found, codes

    @property
    def _resident_key(self) -> tuple[str, int, str]:
        return (self.name, self.size, "resident")

    def _make_resident(self) -> _Block | None:
        """Make the whole file one decoded block in the cache (reading the blocks not
        cached), replacing its per-block entries: a lookup then searches it with one
        ``np.searchsorted`` instead of a few numpy calls per block, the fixed cost that
        dominates when a large batch falls a few keys to a block. Refused (None) when
        the file would take more than ``1 / RESIDENT_BUDGET_SHARE`` of the cache, so a
        file too large for the cache is never re-read whole by every lookup."""
        if self._resident_refused:
            return None
        blocks = self._blocks(np.arange(self.block_count))
        parts = [blocks[block_id] for block_id in range(self.block_count)]
        resident = parts[0] if len(parts) == 1 else _concatenate(parts)
        if RESIDENT_BUDGET_SHARE * resident.nbytes > self._cache.budget_bytes:
            self._resident_refused = True
            return None
        self._cache.discard([(self.name, self.size, block_id) for block_id in blocks])
        self._cache.put(self._resident_key, resident, resident.nbytes)
        return resident

    def scan(self) -> tuple[EncodedKeys, np.ndarray]:
        """Every entry in key order (compaction and ``verify``)."""
        resident = self._cache.get(self._resident_key, count_miss=False)
        if isinstance(resident, _Block):
            parts = [resident]
        else:
            blocks = self._blocks(np.arange(self.block_count))
            parts = [blocks[block_id] for block_id in range(self.block_count)]
        values = [uuid_from_bytes(block.keys) if block.uuid else block.keys for block in parts]
        width = max((part.dtype.itemsize for part in values), default=1)
        merged = (
            np.concatenate([fit(part, width) for part in values]) if values else np.zeros(0, "S1")
        )
        lengths = (matrix_of(merged) != 0).sum(axis=1)
        codes = (
            np.concatenate([block.codes.astype(np.uint32) for block in parts])
            if parts
            else np.zeros(0, np.uint32)
        )
        return EncodedKeys(merged, lengths.astype(np.int64)), codes

    def verify(self) -> int:
        """Read and check every block (those not cached); returns the entry count."""
        keys, _ = self.scan()
        if len(keys) != self.entries:
            raise self._corrupt(f"{len(keys)} entries, the trailer says {self.entries}")
        return len(keys)
