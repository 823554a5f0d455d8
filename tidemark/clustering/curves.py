"""Row orders for clustering layouts: linear sort, z-order and Hilbert curves.

A curve needs each sort column as an unsigned integer that orders like the column. Two
mappings are offered, both vectorised over Arrow columns (numpy, no loop per row):

- ``sortable_keys``: the value itself as 8 order-preserving bytes (Hudi's ``direct``
  curve method). Unlike Hudi, a narrow type is left-aligned (an int32 fills the top 32
  bits, so a curve truncating keys keeps its information), -0.0 equals 0.0 and negative
  doubles sort below 0.0, NaN above +inf, and strings keep their first 8 bytes padded on
  the right (``"b"`` above ``"aa"``). Nulls map to 0, first.
- ``range_ids``: the rank bucket of each value among quantiles of a sample (Hudi's
  ``sample`` method, Delta's OPTIMIZE ZORDER ``range_partition_id``), 1,024 ranges = 10
  bits per column. Skewed values and strings sharing long prefixes (where 8 bytes, or
  delta-rs's 16-byte row prefix, see no difference) still spread over every range;
  strings are compared whole.

``zorder`` interleaves the coordinates' bits; ``hilbert`` is Skilling's transposed
Hilbert index ("Programming the Hilbert curve", 2004), whose consecutive cells are grid
neighbours, so files cut from it have tighter bounds than z-order's jumps.

``sort_order`` sorts rows by a curve and then the columns (or the columns alone) exactly
as Arrow's stable multi-key sort would, on one uint64 key per row through numpy's
vectorised argsort; only rows whose key ties are sorted again by the columns themselves.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidemark.errors import InvalidArgumentError

LAYOUTS = ("linear", "zorder", "hilbert")
CURVE_METHODS = ("sample", "direct")
"""``hoodie.layout.optimize.build.curve.method`` values: rank ranges or raw 8-byte keys."""
DEFAULT_CURVE_METHOD = "sample"
RANGE_BITS = 10
RANGES = 1 << RANGE_BITS
DEFAULT_SAMPLE_ROWS = 100_000
KEY_BITS = 64
_U64 = np.uint64
_SIGN = _U64(1 << 63)
_ONE = _U64(1)


def sortable_keys(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """uint64 keys with ``a < b`` => ``key(a) <= key(b)`` (strictly for distinct non-null
    values of types up to 8 bytes wide); nulls map to 0."""
    array = _plain(values)
    kind = array.type
    if pa.types.is_boolean(kind):
        keys = np.where(_filled(array.cast(pa.uint8()), 0) == 1, _SIGN, _SIGN >> _ONE)
    elif pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        keys = _float_keys(_filled(array.cast(pa.float64()), 0.0))
    elif pa.types.is_signed_integer(kind) or _is_integer_like(kind):
        width = _bit_width(kind)
        integers = _filled(_as_int64(array, width), 0).view(_U64)
        keys = (integers ^ _U64(1 << (width - 1))) << _U64(KEY_BITS - width)
    elif pa.types.is_unsigned_integer(kind):
        width = _bit_width(kind)
        keys = _filled(array.cast(pa.uint64()), 0) << _U64(KEY_BITS - width)
    elif _is_bytes_like(kind):
        keys = _prefix_keys(array)
    else:
        raise InvalidArgumentError(f"cannot order values of type {kind}", field="sort_columns")
    keys = keys.astype(_U64, copy=False)
    if array.null_count:
        keys = np.where(_null_mask(array), _U64(0), keys)
    return keys


def range_ids(
    values: pa.Array | pa.ChunkedArray,
    *,
    ranges: int = RANGES,
    sample_rows: int = DEFAULT_SAMPLE_ROWS,
    seed: int = 0,
) -> np.ndarray:
    """The rank range of each value, in ``[0, ranges)``: 0 for nulls, else 1 + the number
    of boundaries at or below the value, the boundaries being up to ``ranges - 2``
    quantiles of a random sample of ``sample_rows`` values (all of them when fewer)."""
    if ranges < 3:
        raise InvalidArgumentError(f"must be >= 3, got {ranges}", field="ranges")
    array = _plain(values)
    present = pc.drop_null(array)
    if len(present) > sample_rows:
        chosen = np.random.default_rng(seed).choice(len(present), sample_rows, replace=False)
        present = present.take(pa.array(np.sort(chosen)))
    if _is_bytes_like(array.type):
        counted = pc.value_counts(present.take(pc.sort_indices(present)))
        distinct = counted.field("values")
        chosen = _boundary_positions(counted.field("counts").to_numpy(), ranges - 2)
        ids = _count_at_or_below(distinct.take(pa.array(chosen)), array)
    else:
        distinct_keys, counts = np.unique(sortable_keys(present), return_counts=True)
        boundaries = distinct_keys[_boundary_positions(counts, ranges - 2)]
        ids = boundaries_at_or_below(boundaries, sortable_keys(array)).astype(_U64)
    ids = ids + _ONE
    if array.null_count:
        ids = np.where(_null_mask(array), _U64(0), ids)
    return ids.astype(_U64, copy=False)


def zorder(coordinates: Sequence[np.ndarray], bits: int) -> np.ndarray:
    """Z-order (Morton) index: the coordinates' bits interleaved, most significant first
    (bit ``i`` of coordinate ``j`` of ``d`` lands at ``i * d + d - 1 - j``); bits at or
    above ``bits`` are ignored. A byte of a coordinate at a time is spread through a
    256-entry table (a quarter of the array passes of one bit at a time)."""
    _check_grid(coordinates, bits)
    dimensions = len(coordinates)
    spread = _spread_bytes(dimensions)
    index = np.zeros(len(coordinates[0]), dtype=_U64)
    for low in range(0, bits, 8):
        mask = _U64((1 << min(8, bits - low)) - 1)
        for j, coordinate in enumerate(coordinates):
            byte = (coordinate >> _U64(low)) & mask
            index |= spread[byte] << _U64(low * dimensions + dimensions - 1 - j)
    return index


@functools.cache
def _spread_bytes(dimensions: int) -> np.ndarray:
    """Each byte value with its bit ``i`` moved to bit ``i * dimensions`` (bits past 64
    dropped: ``zorder`` masks a byte to the grid's bits, which fit)."""
    spread = np.zeros(256, dtype=_U64)
    for value in range(256):
        bits = sum(1 << (i * dimensions) for i in range(8) if value >> i & 1)
        spread[value] = bits & ((1 << KEY_BITS) - 1)
    spread.setflags(write=False)
    return spread


def hilbert(coordinates: Sequence[np.ndarray], bits: int) -> np.ndarray:
    """Hilbert index of points on a ``2**bits`` grid per dimension (Skilling's
    axes-to-transpose, vectorised over the points, then the transpose interleaved). Each
    step works in place on whole columns with bit masks (no per-step temporaries)."""
    _check_grid(coordinates, bits)
    x = [np.array(c, dtype=_U64) for c in coordinates]
    count = len(x[0])
    high = np.empty(count, dtype=_U64)
    swap = np.empty(count, dtype=_U64)
    for level in range(bits - 1, 0, -1):
        low = _U64((1 << level) - 1)
        for i in range(len(x)):
            _bit_mask(x[i], level, low, out=high)  # low bits where x[i] has the level's bit
            if i > 0:  # where the bit is clear, x[0] and x[i] swap their low bits
                np.bitwise_xor(x[0], x[i], out=swap)
                np.bitwise_and(swap, low, out=swap)
                np.bitwise_and(swap, ~high, out=swap)
                x[i] ^= swap
                x[0] ^= swap
            x[0] ^= high  # where it is set, x[0]'s low bits are inverted
    for i in range(1, len(x)):
        x[i] ^= x[i - 1]
    flips = np.zeros(count, dtype=_U64)
    for level in range(bits - 1, 0, -1):
        flips ^= _bit_mask(x[-1], level, _U64((1 << level) - 1), out=high)
    return zorder([coordinate ^ flips for coordinate in x], bits)


def _bit_mask(values: np.ndarray, level: int, low: np.uint64, *, out: np.ndarray) -> np.ndarray:
    """``low`` where ``values`` has bit ``level`` set, else 0 (into ``out``)."""
    np.right_shift(values, _U64(level), out=out)
    np.bitwise_and(out, _ONE, out=out)
    np.negative(out, out=out)
    np.bitwise_and(out, low, out=out)
    return out


def layout_order(
    rows: pa.Table,
    columns: Sequence[str],
    layout: str,
    *,
    curve_method: str = DEFAULT_CURVE_METHOD,
    sample_rows: int = DEFAULT_SAMPLE_ROWS,
) -> pa.Array:
    """Indices that put ``rows`` in the layout's order. Curves break ties by the columns
    themselves, so rows within one curve cell are sorted too (tighter row groups)."""
    if layout not in LAYOUTS:
        raise InvalidArgumentError(
            f"unknown layout {layout!r} (use {', '.join(LAYOUTS)})", field="layout"
        )
    if curve_method not in CURVE_METHODS:
        raise InvalidArgumentError(
            f"unknown curve method {curve_method!r} (use {', '.join(CURVE_METHODS)})",
            field="curve_method",
        )
    if not columns:
        raise InvalidArgumentError("no sort columns", field="sort_columns")
    if layout == "linear" or len(columns) == 1:
        return sort_order(rows, columns)
    bits = curve_bits(len(columns), curve_method)
    if curve_method == "sample":
        coordinates = [
            range_ids(rows.column(name), ranges=1 << bits, sample_rows=sample_rows)
            for name in columns
        ]
    else:
        shift = _U64(KEY_BITS - bits)
        coordinates = [sortable_keys(rows.column(name)) >> shift for name in columns]
    curve = zorder(coordinates, bits) if layout == "zorder" else hilbert(coordinates, bits)
    return sort_order(rows, columns, curve, bits * len(columns))


def sort_order(
    rows: pa.Table,
    columns: Sequence[str],
    curve: np.ndarray | None = None,
    curve_bits: int = 0,
) -> pa.Array:
    """Indices of a stable sort of ``rows`` by (``curve``, *columns), nulls first. One
    uint64 key per row, the curve above the first column's ``sortable_keys`` (its top
    bits), is sorted by numpy's vectorised argsort, several times faster than Arrow's
    sort on a table; only rows whose key ties another's are sorted again, by the columns
    themselves and then their position."""
    column = _plain(rows.column(columns[0]))
    first = sortable_keys(column)
    if pa.types.is_floating(column.type):  # Arrow sorts NaN next to the nulls, not last
        first[_filled(pc.is_nan(column), False)] = _ONE
    if curve is None:
        key = first
    elif curve_bits >= KEY_BITS:
        key = curve
    else:
        key = (curve << _U64(KEY_BITS - curve_bits)) | (first >> _U64(curve_bits))
    order = np.argsort(key)
    ordered = key[order]
    tied = ordered[1:] == ordered[:-1]
    if not tied.any():
        return pa.array(order)
    starts = np.concatenate([[True], ~tied])  # where a new key begins, in sorted order
    members = np.flatnonzero(~(starts & np.concatenate([starts[1:], [True]])))
    positions = order[members]
    ties = (
        rows.select(list(columns))
        .take(pa.array(positions))
        .append_column("_tm_run", pa.array(np.cumsum(starts[members])))
        .append_column("_tm_row", pa.array(positions))
    )
    by_columns = [(name, "ascending", "at_start") for name in columns]
    resolved = pc.sort_indices(
        ties, sort_keys=[("_tm_run", "ascending"), *by_columns, ("_tm_row", "ascending")]
    )
    order[members] = positions[resolved.to_numpy()]
    return pa.array(order)


def curve_bits(dimensions: int, curve_method: str = DEFAULT_CURVE_METHOD) -> int:
    """Bits per coordinate so that the curve index fits 64 bits."""
    limit = KEY_BITS // dimensions
    return min(RANGE_BITS, limit) if curve_method == "sample" else limit


def check_sortable(schema: pa.Schema, columns: Sequence[str]) -> None:
    """Refuse, naming the column, sort columns that are missing or cannot be ordered."""
    for name in columns:
        if name not in schema.names:
            raise InvalidArgumentError(
                f"no such column {name!r} in the table", field="sort_columns"
            )
        kind = schema.field(name).type
        if pa.types.is_dictionary(kind):
            kind = kind.value_type
        if not orderable(kind):
            raise InvalidArgumentError(
                f"column {name!r} of type {kind} cannot be ordered", field="sort_columns"
            )


def orderable(kind: pa.DataType) -> bool:
    """Flat types a layout orders (and Arrow counts the distinct values of): booleans,
    numbers, dates and times, strings and binaries; not nested or dictionary types."""
    return (
        pa.types.is_boolean(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_decimal(kind)
        or pa.types.is_integer(kind)
        or _is_integer_like(kind)
        or _is_bytes_like(kind)
    )


def _plain(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    array = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    return array


def _filled(array: pa.Array, fill: float) -> np.ndarray:
    filled = array.fill_null(pa.scalar(fill, array.type)) if array.null_count else array
    return filled.to_numpy(zero_copy_only=False)


def _null_mask(array: pa.Array) -> np.ndarray:
    return array.is_null().to_numpy(zero_copy_only=False)


def _is_integer_like(kind: pa.DataType) -> bool:
    """Types stored as signed integers: dates, times, timestamps, durations."""
    return (
        pa.types.is_date(kind)
        or pa.types.is_time(kind)
        or pa.types.is_timestamp(kind)
        or pa.types.is_duration(kind)
    )


def _is_bytes_like(kind: pa.DataType) -> bool:
    return (
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
        or pa.types.is_fixed_size_binary(kind)
    )


def _as_int64(array: pa.Array, width: int) -> pa.Array:
    """Signed integers, or the integers a temporal type stores, widened to int64."""
    if _is_integer_like(array.type):
        array = array.view(pa.int32() if width == 32 else pa.int64())
    return array.cast(pa.int64())


def _bit_width(kind: pa.DataType) -> int:
    return int(kind.bit_width)


def _float_keys(doubles: np.ndarray) -> np.ndarray:
    """IEEE 754 bits made sortable: negatives inverted, positives get the sign bit; -0.0 is
    0.0 and every NaN the positive quiet NaN (above +inf)."""
    canonical = np.where(doubles == 0.0, 0.0, doubles)
    canonical = np.where(np.isnan(canonical), np.nan, canonical).astype(np.float64)
    bits = canonical.view(_U64)
    return np.where((bits & _SIGN) != 0, ~bits, bits | _SIGN)


def _prefix_keys(array: pa.Array) -> np.ndarray:
    """The first 8 bytes, big-endian, zero-padded on the right (shorter sorts first)."""
    binary = array.cast(pa.large_binary())
    count = len(binary)
    offset_buffer, data_buffer = binary.buffers()[1], binary.buffers()[2]
    offsets = np.frombuffer(
        offset_buffer, dtype=np.int64, count=count + 1, offset=binary.offset * 8
    )
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer else np.zeros(0, np.uint8)
    starts, lengths = offsets[:-1], offsets[1:] - offsets[:-1]
    keys = np.zeros(count, dtype=_U64)
    for position in range(8):
        has_byte = lengths > position
        byte = np.zeros(count, dtype=_U64)
        byte[has_byte] = data[starts[has_byte] + position]
        keys |= byte << _U64(56 - 8 * position)
    return keys


def _boundary_positions(counts: np.ndarray, boundaries: int) -> np.ndarray:
    """Indices of up to ``boundaries`` distinct sorted values at equal steps of the sample,
    each value weighing at most one range: a heavy value gets a range of its own and the
    other values still spread over the rest (plain quantiles would spend most boundaries
    on the heavy value and merge everything else into a few ranges)."""
    if len(counts) == 0:
        return np.zeros(0, dtype=np.int64)
    cap = max(1.0, counts.sum() / (boundaries + 1))
    weight = np.cumsum(np.minimum(counts, cap))
    targets = weight[-1] * np.arange(1, boundaries + 1) / (boundaries + 1)
    positions = np.searchsorted(weight, targets, side="left")
    return np.unique(np.minimum(positions, len(counts) - 1))


def boundaries_at_or_below(
    boundaries: np.ndarray, keys: np.ndarray, *, bucket_bits: int = 16
) -> np.ndarray:
    """``np.searchsorted(boundaries, keys, side="right")`` for sorted distinct uint64
    ``boundaries`` and many unsorted keys, faster: keys fall into ``2**bucket_bits``
    buckets of their offset from the smallest key, and a bucket no boundary falls in
    answers every key in it with one count; only keys in a bucket holding a boundary
    are searched (a binary search per key costs a cache miss per step)."""
    if len(keys) == 0 or len(boundaries) == 0:
        return np.searchsorted(boundaries, keys, side="right")
    low = keys.min()
    offsets = keys - low
    shift = _U64(max(0, int(offsets.max()).bit_length() - bucket_bits))
    buckets = (offsets >> shift).astype(np.intp)
    below = int(np.searchsorted(boundaries, low, side="left"))
    inside = (boundaries[below:] - low) >> shift
    count = int(buckets.max()) + 1
    first = below + np.searchsorted(inside, np.arange(count, dtype=_U64), side="left")
    holds = np.zeros(count + 1, dtype=bool)
    holds[np.minimum(inside, _U64(count)).astype(np.intp)] = True
    counts = first[buckets]
    searched = holds[buckets]
    counts[searched] = np.searchsorted(boundaries, keys[searched], side="right")
    return counts


def _count_at_or_below(boundaries: pa.Array, values: pa.Array) -> np.ndarray:
    """For each value, how many (sorted, distinct) boundaries are <= it, by one stable sort
    of boundaries and values together (boundaries first among equals)."""
    count = len(values)
    if len(boundaries) == 0:
        return np.zeros(count, dtype=_U64)
    combined = pa.concat_arrays([boundaries.cast(values.type), values])
    order = pc.sort_indices(combined).to_numpy()
    is_boundary = order < len(boundaries)
    seen = np.cumsum(is_boundary, dtype=np.int64)
    ids = np.zeros(count, dtype=_U64)
    ids[order[~is_boundary] - len(boundaries)] = seen[~is_boundary]
    return ids


def _check_grid(coordinates: Sequence[np.ndarray], bits: int) -> None:
    if not coordinates:
        raise InvalidArgumentError("a curve needs at least one coordinate", field="coordinates")
    if bits < 1 or bits * len(coordinates) > KEY_BITS:
        raise InvalidArgumentError(
            f"{len(coordinates)} coordinates of {bits} bits do not fit {KEY_BITS} bits",
            field="bits",
        )
