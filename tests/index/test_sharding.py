"""Hudi's key-to-shard hash, vectorised: the traps of hudi-facts §3 and a reference model."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemark.errors import InvalidArgumentError
from tidemark.index.sharding import java_string_hash, shard_of


def java_hash_reference(key: str) -> int:
    """Java's String.hashCode, one UTF-16 code unit at a time, 32-bit signed."""
    units = key.encode("utf-16-le")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i : i + 2], "little")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def java_shard_reference(key: str, shards: int) -> int:
    h = java_hash_reference(key)
    java_abs = h if h == -(1 << 31) else abs(h)
    return abs(int(np.fmod(java_abs, shards)))


def test_e_acute_hashes_utf16_not_utf8() -> None:
    assert shard_of(pa.array(["é"]), 10).tolist() == [3]


def test_a_surrogate_pair_is_two_code_units() -> None:
    assert shard_of(pa.array(["😀"]), 10).tolist() == [9]


def test_integer_min_value_stays_negative_through_abs() -> None:
    assert java_string_hash(pa.array(["polygenelubricants"])).tolist() == [-(2**31)]
    assert shard_of(pa.array(["polygenelubricants"]), 7).tolist() == [2]


def test_known_java_hash_codes() -> None:
    hashes = java_string_hash(pa.array(["hello", "", "Aa", "BB"]))
    assert hashes.tolist() == [99162322, 0, 2112, 2112]


def test_sliced_and_large_string_arrays() -> None:
    keys = pa.array(["x", "é", "😀", "polygenelubricants"])
    assert shard_of(keys.slice(1, 2), 10).tolist() == [3, 9]
    assert shard_of(keys.cast(pa.large_string()), 7).tolist() == shard_of(keys, 7).tolist()


def test_refuses_null_keys_and_zero_shards() -> None:
    with pytest.raises(InvalidArgumentError, match="key"):
        shard_of(pa.array(["a", None]), 10)
    with pytest.raises(InvalidArgumentError, match="num_shards"):
        shard_of(pa.array(["a"]), 0)


@settings(max_examples=40, deadline=None)
@given(
    keys=st.lists(st.text(st.characters(codec="utf-8"), max_size=40), min_size=1, max_size=30),
    shards=st.integers(min_value=1, max_value=10000),
)
def test_matches_the_reference_for_any_unicode(keys: list[str], shards: int) -> None:
    assert java_string_hash(pa.array(keys)).tolist() == [java_hash_reference(k) for k in keys]
    assert shard_of(pa.array(keys), shards).tolist() == [
        java_shard_reference(k, shards) for k in keys
    ]
