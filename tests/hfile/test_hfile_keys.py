"""Cell keys, HBase's shortened index keys and Hadoop VInts."""

from __future__ import annotations

import pytest

from tidemark.hfile.keys import decode_vint, encode_key, encode_vint, midpoint_key, row_of

_LATEST = b"\x00\x7f\xff\xff\xff\xff\xff\xff\xff"


def test_a_cell_key_is_an_hbase_put_around_the_row() -> None:
    key = encode_key(b"region=eu")
    assert key == b"\x00\x09region=eu" + _LATEST + b"\x04"
    assert row_of(key) == b"region=eu"


@pytest.mark.parametrize(
    ("left", "right", "row"),
    [
        # the rows differ in their last byte by one: the right row whole
        (b"hudi-key-000000277", b"hudi-key-000000278", b"hudi-key-000000278"),
        # the right row cut after the first byte that differs
        (b"hudi-key-000000469-abc", b"hudi-key-000000470-abc", b"hudi-key-00000047"),
        # room between the differing bytes: the left one raised
        (b"abc-1", b"abe", b"abd"),
        # left a prefix of right
        (b"ab", b"abc", b"abc"),
        # a byte past 0x7f is negative in Java, still raised
        (b"\x80zz", b"\x90", b"\x81"),
        # 0xff cannot be raised
        (b"\xff\x01", b"\xff\x02", b"\xff\x02"),
    ],
)
def test_hbase_index_keys_are_the_shortest_row_between_blocks(
    left: bytes, right: bytes, row: bytes
) -> None:
    key = midpoint_key(left, right)
    assert key == len(row).to_bytes(2, "big") + row + _LATEST + b"\xff"
    assert left < row <= right


@pytest.mark.parametrize("value", [0, 1, -1, 127, -112, 128, -113, 255, 65_536, -(2**40), 2**62])
def test_vints_round_trip(value: int) -> None:
    encoded = encode_vint(value)
    assert decode_vint(encoded + b"tail", 0) == (value, len(encoded))
    assert len(encoded) == 1 if -112 <= value <= 127 else len(encoded) > 1


def test_vints_are_hadoops_not_protobufs() -> None:
    assert encode_vint(300) == b"\x8e\x01\x2c"  # -114: two bytes follow
    assert encode_vint(-200) == b"\x87\xc7"  # -121: one byte of ~value follows
