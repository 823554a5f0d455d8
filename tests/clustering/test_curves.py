"""Order-preserving keys, rank ranges and space-filling curves (tidemark/clustering/curves.py)."""

from __future__ import annotations

import datetime as dt
import decimal
import itertools
import math
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemark.clustering.curves import (
    RANGES,
    boundaries_at_or_below,
    check_sortable,
    curve_bits,
    hilbert,
    layout_order,
    range_ids,
    sortable_keys,
    zorder,
)
from tidemark.errors import InvalidArgumentError

SETTINGS = settings(max_examples=30, deadline=None)

INT_TYPES = {
    pa.int8(): 8,
    pa.int16(): 16,
    pa.int32(): 32,
    pa.int64(): 64,
}
UINT_TYPES = {pa.uint8(): 8, pa.uint16(): 16, pa.uint32(): 32, pa.uint64(): 64}
FLOATS = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [0.0, -0.0, math.inf, -math.inf, math.nan, -math.nan, 5e-324, -5e-324]
)


def _typed_values(draw: st.DrawFn) -> tuple[pa.DataType, list[Any]]:
    """A type and values of it (some null)."""
    kind = draw(
        st.sampled_from(
            [
                *INT_TYPES,
                *UINT_TYPES,
                pa.float32(),
                pa.float64(),
                pa.bool_(),
                pa.string(),
                pa.binary(),
                pa.date32(),
                pa.timestamp("us"),
                pa.decimal128(12, 3),
            ]
        )
    )
    if kind in INT_TYPES:
        bits = INT_TYPES[kind]
        element: st.SearchStrategy[Any] = st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    elif kind in UINT_TYPES:
        element = st.integers(0, 2 ** UINT_TYPES[kind] - 1)
    elif kind == pa.float32():
        element = st.floats(width=32) | st.sampled_from([0.0, -0.0, math.inf, -math.inf])
    elif kind == pa.float64():
        element = FLOATS
    elif kind == pa.bool_():
        element = st.booleans()
    elif kind == pa.string():
        element = st.text(max_size=20) | st.text(alphabet="ab", max_size=12).map(
            lambda tail: "shared-prefix-" + tail
        )
    elif kind == pa.binary():
        element = st.binary(max_size=12)
    elif kind == pa.date32():
        element = st.dates()
    elif kind == pa.timestamp("us"):
        element = st.datetimes()
    else:
        element = st.decimals(
            min_value=-(10**8), max_value=10**8, places=3, allow_nan=False, allow_infinity=False
        )
    return kind, draw(st.lists(st.none() | element, min_size=1, max_size=40))


typed_values = st.composite(_typed_values)


def _order_key(value: Any) -> tuple[int, Any]:
    """Python order with nulls first, NaN last and -0.0 == 0.0 (as the keys promise)."""
    if value is None:
        return (0, 0)
    if isinstance(value, float) and math.isnan(value):
        return (2, 0)
    if isinstance(value, str):
        return (1, value.encode())
    return (1, value)


def _fixed_width(kind: pa.DataType) -> bool:
    return not (pa.types.is_string(kind) or pa.types.is_binary(kind) or pa.types.is_decimal(kind))


@SETTINGS
@given(typed_values())
def test_sortable_keys_preserve_order(case: tuple[pa.DataType, list[Any]]) -> None:
    kind, values = case
    array = pa.array(values, type=kind)
    stored = array.to_pylist()  # float32 rounding and friends, as stored
    keys = sortable_keys(array)
    assert keys.dtype == np.uint64
    for (a, key_a), (b, key_b) in itertools.combinations(zip(stored, keys, strict=True), 2):
        if _order_key(a) < _order_key(b):
            assert key_a <= key_b, (a, b)
            if a is not None and _fixed_width(kind):
                assert key_a < key_b, (a, b)
        elif _order_key(a) == _order_key(b):
            assert key_a == key_b, (a, b)
        else:
            assert key_a >= key_b, (a, b)


def test_keys_fix_hudis_known_weaknesses() -> None:
    strings = sortable_keys(pa.array(["b", "aa", None, ""]))
    assert strings[1] < strings[0]  # "aa" < "b": padded on the right, not the left
    assert strings[2] == 0 and strings[3] == 0  # null first (ties the empty string)
    doubles = sortable_keys(pa.array([-1.0, -0.0, 0.0, 1.0, None]))
    assert doubles[4] < doubles[0] < doubles[1] == doubles[2] < doubles[3]
    narrow = sortable_keys(pa.array([-1, 0, 1], pa.int32()))
    assert (narrow >> np.uint64(32)).tolist() == [0x7FFFFFFF, 0x80000000, 0x80000001]


@SETTINGS
@given(typed_values(), st.integers(3, 64), st.integers(1, 30))
def test_range_ids_preserve_order_within_bounds(
    case: tuple[pa.DataType, list[Any]], ranges: int, sample_rows: int
) -> None:
    kind, values = case
    array = pa.array(values, type=kind)
    stored = array.to_pylist()
    ids = range_ids(array, ranges=ranges, sample_rows=sample_rows)
    assert ids.max() < ranges
    for value, code in zip(stored, ids, strict=True):
        assert (code == 0) == (value is None)
    for (a, id_a), (b, id_b) in itertools.combinations(zip(stored, ids, strict=True), 2):
        if _order_key(a) < _order_key(b):
            assert id_a <= id_b, (a, b)
        elif _order_key(a) == _order_key(b):
            assert id_a == id_b, (a, b)


def test_range_ids_spread_long_shared_prefixes_and_skew() -> None:
    """8-byte keys see one value; rank ranges use every range."""
    names = pa.array([f"customer/region-eu/{i:012d}" for i in range(50_000)])
    assert len(np.unique(sortable_keys(names))) == 1
    assert len(np.unique(range_ids(names))) == RANGES - 1
    skewed = pa.array([7] * 40_000 + list(range(10_000)), pa.int64())
    ids = range_ids(skewed)
    assert len(np.unique(ids[40_000:])) > RANGES // 2


def test_range_ids_of_other_types() -> None:
    days = pa.array([*(dt.date(2024, 1, d) for d in range(1, 29)), None])
    ids = range_ids(days, ranges=8).tolist()
    assert ids[-1] == 0 and ids[:-1] == sorted(ids[:-1]) and ids[0] >= 1
    amounts = pa.array([decimal.Decimal("1.5"), decimal.Decimal("-2.25")], pa.decimal128(6, 2))
    high, low = range_ids(amounts, ranges=8).tolist()
    assert low < high


@SETTINGS
@given(
    st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=300),
    st.lists(st.integers(0, 2**64 - 1), max_size=40),
    st.integers(1, 16),
)
def test_boundaries_at_or_below_is_searchsorted(
    keys: list[int], boundaries: list[int], bucket_bits: int
) -> None:
    values = np.array(keys, np.uint64)
    picked = np.unique(np.array(boundaries + keys[: len(keys) // 3], np.uint64))
    expected = np.searchsorted(picked, values, side="right")
    got = boundaries_at_or_below(picked, values, bucket_bits=bucket_bits)
    assert got.tolist() == expected.tolist()


def _grid(dimensions: int, bits: int) -> list[np.ndarray]:
    points = np.array(list(itertools.product(range(1 << bits), repeat=dimensions)), np.uint64)
    return [points[:, i].copy() for i in range(dimensions)]


@pytest.mark.parametrize(("dimensions", "bits"), [(1, 4), (2, 1), (2, 3), (2, 5), (3, 2), (3, 3)])
def test_curves_are_bijective_on_grids(dimensions: int, bits: int) -> None:
    coordinates = _grid(dimensions, bits)
    cells = 1 << (dimensions * bits)
    for curve in (zorder, hilbert):
        assert np.sort(curve(coordinates, bits)).tolist() == list(range(cells))


@pytest.mark.parametrize(("dimensions", "bits"), [(2, 1), (2, 4), (3, 2), (3, 3), (4, 2)])
def test_hilbert_steps_to_a_neighbour(dimensions: int, bits: int) -> None:
    coordinates = _grid(dimensions, bits)
    order = np.argsort(hilbert(coordinates, bits))
    points = np.stack(coordinates, axis=1).astype(np.int64)[order]
    steps = np.abs(np.diff(points, axis=0)).sum(axis=1)
    assert steps.tolist() == [1] * (len(points) - 1)
    assert points[0].tolist() == [0] * dimensions


@SETTINGS
@given(st.integers(1, 3), st.data())
def test_zorder_is_monotone_in_every_coordinate(dimensions: int, data: st.DataObject) -> None:
    bits = 20 // dimensions
    point = st.lists(st.integers(0, (1 << bits) - 1), min_size=dimensions, max_size=dimensions)
    low, high = data.draw(point), data.draw(point)
    high = [max(a, b) for a, b in zip(low, high, strict=True)]
    coordinates = [np.array([a, b], np.uint64) for a, b in zip(low, high, strict=True)]
    index = zorder(coordinates, bits)
    assert index[0] <= index[1]


@pytest.mark.parametrize(
    ("dimensions", "bits"), [(1, 64), (2, 32), (2, 10), (3, 21), (4, 16), (5, 12), (9, 7), (64, 1)]
)
def test_zorder_matches_interleaving_one_bit_at_a_time(dimensions: int, bits: int) -> None:
    """The byte-table interleave is the plain bit loop: bit ``i`` of coordinate ``j`` at
    ``i * d + d - 1 - j``, bits at or above ``bits`` ignored."""
    rng = np.random.default_rng(dimensions * 100 + bits)
    coordinates = [
        rng.integers(0, 2**63, 1000).astype(np.uint64) * np.uint64(2) + np.uint64(i % 2)
        for i in range(dimensions)
    ]
    expected = np.zeros(1000, dtype=np.uint64)
    for bit in range(bits - 1, -1, -1):
        for coordinate in coordinates:
            expected = (expected << np.uint64(1)) | ((coordinate >> np.uint64(bit)) & np.uint64(1))
    assert np.array_equal(zorder(coordinates, bits), expected)


def test_curves_refuse_grids_wider_than_64_bits() -> None:
    with pytest.raises(InvalidArgumentError, match="do not fit"):
        zorder([np.zeros(1, np.uint64)] * 3, 22)


def test_layout_orders() -> None:
    rows = pa.table(
        {
            "a": pa.array([3, 1, None, 2, 1], pa.int64()),
            "b": pa.array(["x", "y", "z", None, "a"]),
        }
    )
    linear = layout_order(rows, ["a", "b"], "linear").to_pylist()
    assert [rows.column("a")[i].as_py() for i in linear] == [None, 1, 1, 2, 3]
    assert [rows.column("b")[i].as_py() for i in linear[1:3]] == ["a", "y"]
    for layout in ("zorder", "hilbert"):
        for method in ("sample", "direct"):
            order = layout_order(rows, ["a", "b"], layout, curve_method=method).to_pylist()
            assert sorted(order) == list(range(5))
    with pytest.raises(InvalidArgumentError, match="unknown layout"):
        layout_order(rows, ["a"], "spiral")


def _arrow_layout_order(rows: pa.Table, columns: list[str], layout: str, method: str) -> list[int]:
    """The layout's order by Arrow's stable sort of (curve, *columns), nulls first."""
    by_columns = [(name, "ascending", "at_start") for name in columns]
    if layout == "linear" or len(columns) == 1:
        return pc.sort_indices(rows, sort_keys=by_columns).to_pylist()
    bits = curve_bits(len(columns), method)
    if method == "sample":
        coordinates = [range_ids(rows.column(name), ranges=1 << bits) for name in columns]
    else:
        shift = np.uint64(64 - bits)
        coordinates = [sortable_keys(rows.column(name)) >> shift for name in columns]
    curve = (zorder if layout == "zorder" else hilbert)(coordinates, bits)
    keyed = rows.select(columns).append_column("curve", pa.array(curve))
    sort_keys = [("curve", "ascending", "at_start"), *by_columns]
    return pc.sort_indices(keyed, sort_keys=sort_keys).to_pylist()


def _with_nulls(values: np.ndarray, rng: np.random.Generator) -> pa.Array:
    return pa.array(values, mask=rng.random(len(values)) < 0.1)


def test_layout_orders_are_arrows_stable_sort_of_curve_and_columns() -> None:
    """The one-key numpy sort with ties re-sorted gives exactly Arrow's stable multi-key
    order: duplicates, nulls, NaN (Arrow puts it next to the nulls), -0.0 beside 0.0, the
    smallest int64 (whose key is a null's), strings sharing their first 8 bytes."""
    rng = np.random.default_rng(7)
    count = 3000
    words = np.array(["", "a", "aa", "b", "aaaaaaaaaa", "aaaaaaaaab"], dtype=object)
    special = [math.nan, -0.0, 0.0, math.inf, -math.inf]
    tables = {
        "few ints": pa.table({"a": rng.integers(-4, 4, count), "b": rng.integers(0, 3, count)}),
        "wide ints": pa.table(
            {
                "a": _with_nulls(
                    np.r_[
                        rng.integers(-(2**63), 2**63 - 1, count - 2, dtype=np.int64), [-(2**63)] * 2
                    ],
                    rng,
                ),
                "b": _with_nulls(rng.integers(0, 5, count), rng),
            }
        ),
        "floats": pa.table(
            {
                "a": _with_nulls(np.r_[rng.normal(size=count - 5), special], rng),
                "b": _with_nulls(rng.normal(size=count), rng),
            }
        ),
        "strings": pa.table(
            {
                "a": _with_nulls(words[rng.integers(0, len(words), count)], rng),
                "b": rng.integers(0, 4, count),
            }
        ),
        "timestamps": pa.table(
            {
                "a": pa.array(rng.integers(0, 1000, count)).cast(pa.timestamp("us", tz="UTC")),
                "b": pa.array(rng.integers(0, 50, count), pa.int32()),
            }
        ),
    }
    for name, rows in tables.items():
        for layout, method, width in itertools.product(
            ("linear", "zorder", "hilbert"), ("sample", "direct"), (1, 2)
        ):
            columns = rows.column_names[:width]
            expected = _arrow_layout_order(rows, columns, layout, method)
            order = layout_order(rows, columns, layout, curve_method=method).to_pylist()
            assert order == expected, (name, layout, method, columns)


def test_check_sortable_names_the_column() -> None:
    schema = pa.schema([("a", pa.int64()), ("tags", pa.list_(pa.string()))])
    check_sortable(schema, ["a"])
    with pytest.raises(InvalidArgumentError, match="'nope'"):
        check_sortable(schema, ["nope"])
    with pytest.raises(InvalidArgumentError, match="'tags'"):
        check_sortable(schema, ["a", "tags"])
