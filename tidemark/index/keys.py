"""Record keys as numpy arrays, so every index operation works on whole batches.

A batch of keys becomes a fixed-width ``S<w>`` array of their UTF-8 bytes, zero padded.
Keys hold no NUL character (refused here), so zero padding is unambiguous and numpy's
comparison of ``S`` values is exactly the bytewise order Arrow sorts strings by: one
order for the writer's sort, the block index and ``np.searchsorted`` at lookup.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidemark.errors import InvalidArgumentError

UUID_LENGTH = 36
_DASHES = (8, 13, 18, 23)
_HEX_COLUMNS = np.array([i for i in range(UUID_LENGTH) if i not in _DASHES])
_MIX = np.uint64(0x9E3779B97F4A7C15)
_MIX2 = np.uint64(0xBF58476D1CE4E5B9)


class EncodedKeys:
    """Keys as zero-padded UTF-8 bytes (``values``, dtype ``S<width>``) and byte lengths.

    Derived arrays (8-byte prefixes, which keys are UUIDs and their raw bytes) are
    computed once per batch, on first use, and carried along by ``take``."""

    def __init__(self, values: np.ndarray, lengths: np.ndarray, **derived: np.ndarray) -> None:
        self.values = values
        self.lengths = lengths
        self._derived = derived

    def __len__(self) -> int:
        return len(self.values)

    @property
    def width(self) -> int:
        return int(self.values.dtype.itemsize)

    def take(self, index: np.ndarray | slice) -> EncodedKeys:
        derived = {name: _rows(array, index) for name, array in self._derived.items()}
        return EncodedKeys(_rows(self.values, index), self.lengths[index], **derived)

    def _get(self, name: str, compute: Callable[[], np.ndarray]) -> np.ndarray:
        if name not in self._derived:
            self._derived[name] = compute()
        return self._derived[name]

    def prefixes(self) -> np.ndarray:
        """``prefix64`` of every key."""
        return self._get("prefixes", lambda: prefix64(self.values))

    def uuids(self) -> np.ndarray:
        """Which keys are canonical lowercase UUIDs."""
        if "uuids" not in self._derived:
            self._derived["uuids"], self._derived["raw"] = parse_uuids(self.values, self.lengths)
        return self._derived["uuids"]

    def raw_uuids(self) -> np.ndarray:
        """Each UUID key's 16 raw bytes (``S16``; zeros for other keys)."""
        self.uuids()
        return self._derived["raw"]

    def raw_prefixes(self) -> np.ndarray:
        """``prefix64`` of the raw UUID bytes (the UUID's high 64 bits)."""
        return self._get("raw_prefixes", lambda: prefix64(self.raw_uuids()))

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


def _rows(array: np.ndarray, index: np.ndarray | slice) -> np.ndarray:
    """``array[index]``; fixed-width byte strings are gathered as rows of a byte matrix,
    several times faster than numpy's per-element copy of ``S<w>`` items."""
    if isinstance(index, slice) or array.dtype.kind != "S":
        return array[index]
    return np.take(matrix_of(array), index, axis=0).view(array.dtype).ravel()


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


def prefix64(values: np.ndarray) -> np.ndarray:
    """Each key's first 8 bytes (zero padded) as a big-endian uint64: integer order of
    prefixes is the keys' order wherever the prefixes differ."""
    prefix = np.zeros((len(values), 8), np.uint8)
    width = min(8, values.dtype.itemsize)
    prefix[:, :width] = matrix_of(values)[:, :width]
    return prefix.view(">u8").ravel().astype(np.uint64)


def fit(values: np.ndarray, width: int) -> np.ndarray:
    """``values`` at ``width`` bytes: padded, or truncated past ``width`` (callers pass one
    more than the longest key they compare with, so a truncated key never equals one)."""
    return values if values.dtype.itemsize == width else values.astype(f"S{width}")


_HEX_RUNS = ((0, 8), (9, 13), (14, 18), (19, 23), (24, 36))


def _hex_pair_table() -> np.ndarray:
    """Two ASCII hex digits read as a little-endian uint16 -> their byte; else 0xFFFF."""
    table = np.full(1 << 16, 0xFFFF, np.uint16)
    digits = np.frombuffer(b"0123456789abcdef", np.uint8).astype(np.uint16)
    table[digits[:, None] | (digits[None, :] << 8)] = np.arange(256, dtype=np.uint16).reshape(
        16, 16
    )
    return table


_HEX_PAIRS = _hex_pair_table()


def parse_uuids(values: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which keys are canonical lowercase UUIDs (36 chars, 8-4-4-4-12 hex digits) and
    their 16 raw bytes (``S16``, zeros for other keys); raw order is string order. One
    table lookup per pair of hex digits."""
    if values.dtype.itemsize < UUID_LENGTH:
        return np.zeros(len(values), bool), np.zeros(len(values), "S16")
    text = matrix_of(values)[:, :UUID_LENGTH]
    hexes = np.concatenate([text[:, start:end] for start, end in _HEX_RUNS], axis=1)
    pairs = _HEX_PAIRS[hexes.view("<u2")]
    dashes = (text[:, list(_DASHES)] == ord("-")).all(axis=1)
    mask = (lengths == UUID_LENGTH) & dashes & (pairs < 256).all(axis=1)
    raw = pairs.astype(np.uint8)
    raw[~mask] = 0
    return mask, raw.view("S16").ravel()


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
    """Distinct keys in index order and, for each input key, its position among them.

    Keys sort by their first 8 bytes as one big-endian integer (several times faster
    than sorting strings); only keys sharing those bytes are then sorted as strings."""
    encoded = encode_keys(keys)
    prefixes = prefix64(encoded.values)
    order = np.argsort(prefixes)
    equal = prefixes[order][1:] == prefixes[order][:-1]
    if equal.any():
        tied = np.flatnonzero(np.append(equal, False) | np.insert(equal, 0, False))
        group = order[tied]
        by_value = group[np.argsort(encoded.values[group], kind="stable")]
        order[tied] = by_value[np.argsort(prefixes[by_value], kind="stable")]
    ordered = encoded.values[order]
    first = np.ones(len(order), bool)
    first[1:] = ordered[1:] != ordered[:-1]
    inverse = np.empty(len(order), np.int64)
    inverse[order] = np.cumsum(first) - 1
    return encoded.take(order[first]), inverse


def sort_order(keys: pa.Array) -> np.ndarray:
    """Indices that sort ``keys`` bytewise (Arrow's string order, the index's order)."""
    return pc.sort_indices(keys).to_numpy()
