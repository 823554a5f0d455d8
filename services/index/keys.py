"""Record keys as numpy arrays, so every index operation works on whole batches.

A batch of keys becomes a fixed-width ``S<w>`` array of their UTF-8 bytes, zero padded.
Keys hold no NUL character (refused here), so zero padding is unambiguous and numpy's
comparison of ``S`` values is exactly the bytewise order Arrow sorts strings by: one
order for the writer's sort, the block index and ``np.searchsorted`` at lookup.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidemark.errors import InvalidArgumentError

UUID_LENGTH = 36
_DASHES = (8, 13, 18, 23)
_HEX_COLUMNS = np.array([i for i in range(UUID_LENGTH) if i not in _DASHES])
_MIX = np.uint64(0x9E3779B97F4A7C15)
_MIX2 = np.uint64(0xBF58476D1CE4E5B9)


@dataclass(frozen=True)
class EncodedKeys:
    """Keys as zero-padded UTF-8 bytes (``values``, dtype ``S<width>``) and byte lengths."""

    values: np.ndarray
    lengths: np.ndarray

    def __len__(self) -> int:
        return len(self.values)

    @property
    def width(self) -> int:
        return int(self.values.dtype.itemsize)

    def take(self, index: np.ndarray | slice) -> EncodedKeys:
        return EncodedKeys(self.values[index], self.lengths[index])

    def to_arrow(self) -> pa.Array:
        """The keys back as an Arrow string array."""
        if len(self) == 0:
            return pa.array([], pa.string())
        matrix = self.values.view(np.uint8).reshape(len(self), self.width)
        mask = np.arange(self.width) < self.lengths[:, None]
        offsets = np.zeros(len(self) + 1, np.int64)
        np.cumsum(self.lengths, out=offsets[1:])
        return pa.LargeStringArray.from_buffers(
            len(self), pa.py_buffer(offsets), pa.py_buffer(matrix[mask].tobytes())
        ).cast(pa.string())


def string_buffers(keys: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Offsets (int64, n+1, starting at the first key) and the UTF-8 bytes of a string array.

    Raises InvalidArgumentError(field="key") for a null key."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    if pa.types.is_null(keys.type):
        keys = keys.cast(pa.string())
    if not (pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type)):
        raise InvalidArgumentError(f"keys must be strings, not {keys.type}", field="key")
    if keys.null_count:
        raise InvalidArgumentError("a key is null", field="key")
    offset_type = np.int32 if pa.types.is_string(keys.type) else np.int64
    _, offsets_buffer, data_buffer = keys.buffers()
    offsets = np.frombuffer(offsets_buffer, offset_type)[keys.offset : keys.offset + len(keys) + 1]
    offsets = offsets.astype(np.int64)
    data = (
        np.frombuffer(data_buffer, np.uint8)[offsets[0] : offsets[-1]]
        if data_buffer is not None and len(keys)
        else np.zeros(0, np.uint8)
    )
    return offsets - offsets[0] if len(offsets) else np.zeros(1, np.int64), data


def encode_keys(keys: pa.Array) -> EncodedKeys:
    """Keys as an ``S<w>`` array; refuses null, empty and NUL-holding keys (field "key")."""
    offsets, data = string_buffers(keys)
    lengths = np.diff(offsets)
    if len(lengths) and lengths.min() == 0:
        raise InvalidArgumentError("a key is empty", field="key")
    if (data == 0).any():
        raise InvalidArgumentError("a key holds a NUL character", field="key")
    return EncodedKeys(_pad(offsets, data, lengths), lengths)


def _pad(offsets: np.ndarray, data: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    count = len(lengths)
    width = max(int(lengths.max()) if count else 0, 1)
    if count and int(lengths.min()) == width:
        return np.ascontiguousarray(data).view(f"S{width}")
    matrix = np.zeros((count, width), np.uint8)
    rows = np.repeat(np.arange(count), lengths)
    columns = np.arange(len(data)) - np.repeat(offsets[:-1], lengths)
    matrix[rows, columns] = data
    return matrix.view(f"S{width}").ravel()


def matrix_of(values: np.ndarray) -> np.ndarray:
    """The (n, width) uint8 view of an ``S<width>`` array."""
    return values.view(np.uint8).reshape(len(values), values.dtype.itemsize)


def fit(values: np.ndarray, width: int) -> np.ndarray:
    """``values`` at ``width`` bytes: padded, or truncated past ``width`` (callers pass one
    more than the longest key they compare with, so a truncated key never equals one)."""
    return values if values.dtype.itemsize == width else values.astype(f"S{width}")


def uuid_mask(keys: EncodedKeys) -> np.ndarray:
    """Which keys are canonical lowercase UUIDs (36 chars, 8-4-4-4-12 hex digits)."""
    if keys.width < UUID_LENGTH:
        return np.zeros(len(keys), bool)
    matrix = matrix_of(keys.values)[:, :UUID_LENGTH]
    hexes = matrix[:, _HEX_COLUMNS]
    is_hex = ((hexes >= ord("0")) & (hexes <= ord("9"))) | (
        (hexes >= ord("a")) & (hexes <= ord("f"))
    )
    dashes = (matrix[:, list(_DASHES)] == ord("-")).all(axis=1)
    return (keys.lengths == UUID_LENGTH) & dashes & is_hex.all(axis=1)


def uuid_to_bytes(values: np.ndarray) -> np.ndarray:
    """Canonical UUID keys (``uuid_mask`` true) as their 16 raw bytes (``S16``); the order
    of the raw bytes is the order of the strings."""
    hexes = matrix_of(values)[:, _HEX_COLUMNS].astype(np.uint8)
    nibbles = np.where(hexes <= ord("9"), hexes - ord("0"), hexes - (ord("a") - 10)).astype(
        np.uint8
    )
    raw = (nibbles[:, 0::2] << 4) | nibbles[:, 1::2]
    return np.ascontiguousarray(raw).view("S16").ravel()


def uuid_from_bytes(raw: np.ndarray) -> np.ndarray:
    """16-byte UUIDs (``S16``) back to their canonical 36-char ``S36`` keys."""
    matrix = raw.view(np.uint8).reshape(len(raw), 16)
    digits = np.frombuffer(b"0123456789abcdef", np.uint8)
    out = np.full((len(raw), UUID_LENGTH), ord("-"), np.uint8)
    out[:, _HEX_COLUMNS[0::2]] = digits[matrix >> 4]
    out[:, _HEX_COLUMNS[1::2]] = digits[matrix & 0x0F]
    return out.view(f"S{UUID_LENGTH}").ravel()


def hash64(keys: EncodedKeys) -> np.ndarray:
    """A 64-bit mixing hash of each key's bytes (for the shard file's filter), the same
    whatever width the batch is padded to: only words inside a key's length are mixed."""
    words_count = -(-keys.width // 8)
    matrix = np.zeros((len(keys), words_count * 8), np.uint8)
    matrix[:, : keys.width] = matrix_of(keys.values)
    words = matrix.view("<u8")
    h = keys.lengths.astype(np.uint64) * _MIX
    for column in range(words_count):
        mixed = (h ^ words[:, column]) * _MIX2
        mixed ^= mixed >> np.uint64(31)
        h = np.where(keys.lengths > 8 * column, mixed, h)
    h ^= h >> np.uint64(29)
    h *= _MIX
    h ^= h >> np.uint64(32)
    return h


def sort_unique(keys: pa.Array) -> tuple[EncodedKeys, np.ndarray]:
    """Distinct keys in index order and, for each input key, its position among them."""
    encoded = encode_keys(keys)
    values, inverse = np.unique(encoded.values, return_inverse=True)
    lengths = np.zeros(len(values), np.int64)
    lengths[inverse] = encoded.lengths
    return EncodedKeys(values, lengths), inverse


def sort_order(keys: pa.Array) -> np.ndarray:
    """Indices that sort ``keys`` bytewise (Arrow's string order, the index's order)."""
    return pc.sort_indices(keys).to_numpy()
