"""Hudi's key-to-shard hash (hudi-facts §3), vectorised over an Arrow string array.

``shard = abs(abs(javaStringHashCode(key)) % numShards)`` where Java's ``String.hashCode``
is ``h = 31*h + c`` over UTF-16 code units with 32-bit signed wrap-around, ``Math.abs``
leaves ``Integer.MIN_VALUE`` negative and ``%`` keeps the dividend's sign. UTF-8 bytes are
decoded to code points and split into surrogate pairs with numpy, never per key in Python.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from tidemark.errors import InvalidArgumentError
from tidemark.index.keys import string_buffers

MIN_SHARDS = 1


def _code_units(offsets: np.ndarray, data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """UTF-16 code units of every key, concatenated, and the count per key."""
    if len(data) == 0 or int(data.max()) < 0x80:
        return data.astype(np.uint32), np.diff(offsets)
    padded = np.concatenate([data, np.zeros(3, np.uint8)]).astype(np.uint32)
    leads = np.flatnonzero((data & 0xC0) != 0x80)
    b0, b1, b2, b3 = (padded[leads + i] for i in range(4))
    width = np.select([b0 < 0x80, b0 < 0xE0, b0 < 0xF0], [1, 2, 3], 4)
    points = np.select(
        [width == 1, width == 2, width == 3],
        [
            b0,
            ((b0 & 0x1F) << 6) | (b1 & 0x3F),
            ((b0 & 0x0F) << 12) | ((b1 & 0x3F) << 6) | (b2 & 0x3F),
        ],
        ((b0 & 0x07) << 18) | ((b1 & 0x3F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F),
    )
    pairs = points > 0xFFFF
    units_per_point = 1 + pairs.astype(np.int64)
    first = np.cumsum(units_per_point) - units_per_point
    units = np.empty(int(units_per_point.sum()), np.uint32)
    supplementary = points[pairs] - 0x10000
    units[first[~pairs]] = points[~pairs]
    units[first[pairs]] = 0xD800 + (supplementary >> 10)
    units[first[pairs] + 1] = 0xDC00 + (supplementary & 0x3FF)
    key_of_point = np.searchsorted(offsets, leads, side="right") - 1
    counts = np.bincount(key_of_point, weights=units_per_point, minlength=len(offsets) - 1)
    return units, counts.astype(np.int64)


HORNER_MAX_WIDTH = 64
"""Up to this length, ASCII keys hash column by column (Horner's rule over a padded
matrix, one vector operation per character position); longer or non-ASCII ones term by
term."""


def _horner(offsets: np.ndarray, data: np.ndarray) -> np.ndarray:
    """``h = 31*h + c`` down the columns of the zero-padded (n, width) matrix of ASCII
    keys, only where the column is inside the key."""
    lengths = np.diff(offsets)
    width = int(lengths.max())
    if int(lengths.min()) == width:
        matrix = data.reshape(len(lengths), width)
    else:
        matrix = np.zeros((len(lengths), width), np.uint8)
        matrix[np.arange(width) < lengths[:, None]] = data
    hashes = np.zeros(len(lengths), np.uint32)
    ragged = int(lengths.min()) < width
    for column in range(width):
        stepped = hashes * np.uint32(31) + matrix[:, column]
        hashes = np.where(lengths > column, stepped, hashes) if ragged else stepped
    return hashes.view(np.int32)


def java_string_hash(keys: pa.Array) -> np.ndarray:
    """Java's ``String.hashCode`` of every key, as int32."""
    offsets, data = string_buffers(keys)
    if len(data) and int(data.max()) < 0x80 and int(np.diff(offsets).max()) <= HORNER_MAX_WIDTH:
        return _horner(offsets, data)
    units, counts = _code_units(offsets, data)
    if len(units) == 0:
        return np.zeros(len(counts), np.int32)
    starts = np.cumsum(counts) - counts
    exponents = np.repeat(counts + starts - 1, counts) - np.arange(len(units))
    powers = np.cumprod(np.full(int(counts.max()), 31, np.uint32), dtype=np.uint32)
    powers = np.concatenate([np.ones(1, np.uint32), powers[:-1]])
    terms = units * powers[exponents]
    sums = np.concatenate([np.zeros(1, np.uint32), np.cumsum(terms, dtype=np.uint32)])
    return (sums[starts + counts] - sums[starts]).view(np.int32)


def shard_of(keys: pa.Array, num_shards: int) -> np.ndarray:
    """Each key's shard in ``[0, num_shards)`` as Hudi assigns it, as the smallest
    unsigned type that holds it (uint16 up to 65,536 shards: grouping by shard is then
    numpy's radix sort)."""
    if num_shards < MIN_SHARDS:
        raise InvalidArgumentError(f"must be at least 1, got {num_shards}", field="num_shards")
    hashes = java_string_hash(keys).astype(np.int64)
    java_abs = np.where(hashes == np.iinfo(np.int32).min, hashes, np.abs(hashes))
    shard_type = np.uint16 if num_shards <= 1 << 16 else np.uint32
    return np.abs(np.fmod(java_abs, num_shards)).astype(shard_type)


def group_by_shard(shards: np.ndarray, num_shards: int) -> tuple[np.ndarray, np.ndarray]:
    """A stable order of the rows that groups them by shard, and the bounds of each
    shard's run in it: shard ``s`` is ``order[bounds[s]:bounds[s + 1]]``."""
    order = np.argsort(shards, kind="stable")
    bounds = np.zeros(num_shards + 1, np.int64)
    np.cumsum(np.bincount(shards, minlength=num_shards), out=bounds[1:])
    return order, bounds
