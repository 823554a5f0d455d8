"""The shard file: round trips over every kind of key, tombstones, corruption, bad input."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemark.errors import DataLossError, InvalidArgumentError
from tidemark.index.block_cache import BlockCache
from tidemark.index.keys import sort_unique
from tidemark.index.shard_file import ShardReader, write_shard
from tidemark.storage import Storage

from .indexkit import INSTANT, locations, uuid_keys

KEY_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1)


def shard_of_keys(keys: list[str], block_bytes: int = 256) -> bytes:
    return write_shard(
        pa.array(keys), **locations(len(keys)), as_of=INSTANT, block_bytes=block_bytes
    )


def lookup(reader: ShardReader, queries: list[str]) -> list[dict[str, str] | None]:
    """Each query's location row (or None), in query order; the reader gives the same
    answers for the queries as they come (any order, repeats) and sorted and distinct."""
    unique, inverse = sort_unique(pa.array(queries))
    found, codes = reader.lookup(unique)
    as_they_come = reader.lookup(pa.array(queries))
    assert (as_they_come[0] == found[inverse]).all()
    assert (as_they_come[1] == np.where(found, codes, 0)[inverse]).all()
    rows = reader.dictionary.take(pa.array(codes, mask=~found)).to_pylist()
    return [rows[i] if found[i] else None for i in inverse]


def expected(keys: list[str], queries: list[str]) -> list[dict[str, str] | None]:
    table = pa.table(locations(len(keys))).to_pylist()
    by_key = {
        key: {
            "partition": row["partitions"],
            "file_id": row["file_ids"],
            "instant": row["instants"],
        }
        for key, row in zip(keys, table, strict=True)
    }
    return [by_key.get(query) for query in queries]


def test_uuid_keys_round_trip_across_many_blocks() -> None:
    keys = uuid_keys(5000)
    reader = ShardReader.from_bytes(shard_of_keys(keys, block_bytes=4096), BlockCache())
    queries = keys[::3] + uuid_keys(500, seed=1) + ["not-a-uuid", keys[0].upper()]

    assert reader.block_count > 10
    assert reader.entries == 5000
    assert lookup(reader, queries) == expected(keys, queries)
    scanned, _ = reader.scan()
    assert scanned.to_arrow().to_pylist() == sorted(keys)
    assert reader.info.min_key == min(keys) and reader.info.max_key == max(keys)


def test_columns_in_chunks_write_the_same_file() -> None:
    """Columns of a table (a compaction's merge, a stage's changes) come in chunks: the
    file is byte for byte the one written from whole arrays."""
    keys = uuid_keys(1_000)
    columns = {"keys": pa.array(keys), **locations(len(keys))}

    def chunked(array: pa.Array) -> pa.ChunkedArray:
        return pa.chunked_array([array.slice(0, 300), array.slice(300)])

    whole = write_shard(**columns, as_of=INSTANT)
    in_chunks = {name: chunked(array) for name, array in columns.items()}
    assert write_shard(**in_chunks, as_of=INSTANT) == whole


def test_awkward_keys_round_trip() -> None:
    keys = [
        "a", "ab", "abc", "abd", "b",  # prefixes of each other
        "Aa", "BB", "AaAa", "BBBB", "AaBB",  # equal Java hash codes
        "é", "😀", "日本語キー", "ключ", "\U0010ffff",  # unicode, BMP and beyond
        "k" * 10_000, "k" * 9_999 + "l",  # very long
        *uuid_keys(300),  # blocks of UUIDs between the others
        "polygenelubricants", " ", "\t\n", "a/b=c,d",
    ]  # fmt: skip
    keys += [bytes(np.random.default_rng(3).integers(1, 128, 40, np.uint8)).decode()]
    reader = ShardReader.from_bytes(shard_of_keys(keys, block_bytes=512), BlockCache())
    queries = [*keys, "a\u0301", "k" * 10_001, "k" * 5, "abca", "Ab", "B"]

    assert lookup(reader, queries) == expected(keys, queries)


@settings(max_examples=30, deadline=None)
@given(
    keys=st.sets(KEY_TEXT, min_size=1, max_size=60),
    others=st.lists(KEY_TEXT, max_size=20),
    block_bytes=st.sampled_from([16, 200, 65536]),
)
def test_lookup_agrees_with_a_dict(keys: set[str], others: list[str], block_bytes: int) -> None:
    ordered = list(keys)
    reader = ShardReader.from_bytes(shard_of_keys(ordered, block_bytes), BlockCache())
    queries = ordered + others

    assert lookup(reader, queries) == expected(ordered, queries)


def test_tombstones_are_dictionary_rows_with_null_location() -> None:
    data = write_shard(
        pa.array(["gone", "kept"]),
        pa.array([None, "p"]),
        pa.array([None, "f-0"]),
        pa.array([INSTANT, INSTANT]),
        kind="delta",
        as_of=INSTANT,
    )
    reader = ShardReader.from_bytes(data, BlockCache())

    assert lookup(reader, ["gone", "kept"]) == [
        {"partition": None, "file_id": None, "instant": INSTANT},
        {"partition": "p", "file_id": "f-0", "instant": INSTANT},
    ]
    assert reader.info.kind == "delta"


def test_an_empty_shard_answers_absent() -> None:
    reader = ShardReader.from_bytes(shard_of_keys([]), BlockCache())
    assert lookup(reader, ["a"]) == [None]
    assert reader.verify() == 0


@pytest.mark.parametrize(
    ("keys", "partitions", "file_ids", "field"),
    [
        (["a", "a"], ["p", "p"], ["f", "f"], "key"),
        (["a", ""], ["p", "p"], ["f", "f"], "key"),
        (["a", "b\x00"], ["p", "p"], ["f", "f"], "key"),
        (["a", None], ["p", "p"], ["f", "f"], "key"),
        (["a", "b"], ["p", None], ["f", "f"], "file_id"),
    ],
)
def test_bad_entries_are_refused_naming_the_field(
    keys: list[str | None], partitions: list[str | None], file_ids: list[str], field: str
) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        write_shard(
            pa.array(keys, pa.string()),
            pa.array(partitions, pa.string()),
            pa.array(file_ids),
            pa.array([INSTANT] * len(keys)),
            as_of=INSTANT,
        )
    assert refused.value.field == field


def test_every_flipped_byte_is_a_checksum_error_never_a_wrong_answer() -> None:
    keys = [*uuid_keys(40), *(f"key-{i}" for i in range(40))]
    data = shard_of_keys(keys, block_bytes=300)
    queries = [*keys, "key-x", *uuid_keys(5, seed=9)]
    truth = expected(keys, queries)

    for position in range(len(data)):
        flipped = bytearray(data)
        flipped[position] ^= 0x10
        with pytest.raises(DataLossError, match="damaged"):
            reader = ShardReader.from_bytes(bytes(flipped), BlockCache())
            answer = lookup(reader, queries)
            assert answer == truth  # a lookup that did not touch the byte is still right
            reader.verify()


def test_a_truncated_file_is_a_data_loss_error() -> None:
    data = shard_of_keys(["a", "b"])
    for size in (0, 10, len(data) - 1):
        with pytest.raises(DataLossError):
            ShardReader.from_bytes(data[:size], BlockCache())


def test_reads_only_the_blocks_a_batch_needs_from_storage(local_storage: Storage) -> None:
    keys = uuid_keys(20_000)
    local_storage.write("s/base.tmi", shard_of_keys(keys, block_bytes=8192))
    reader = ShardReader.open(local_storage, "s/base.tmi", BlockCache())
    local_storage.requests.reset()

    assert lookup(reader, keys[:1]) == expected(keys, keys[:1])
    assert local_storage.requests.snapshot() == {"get": 1}
    assert lookup(reader, keys[:1]) == expected(keys, keys[:1])
    assert local_storage.requests.snapshot() == {"get": 1}  # the block came from the cache


def test_a_dense_batch_makes_the_file_resident_in_place_of_its_blocks() -> None:
    keys = [*uuid_keys(3000), *(f"key-{i}" for i in range(300))]  # UUID and text blocks
    cache = BlockCache()
    reader = ShardReader.from_bytes(shard_of_keys(keys, block_bytes=2048), cache)
    assert reader.block_count > 20
    queries = [*keys[::7], "key-x", *uuid_keys(50, seed=9)]

    assert lookup(reader, keys[:1]) == expected(keys, keys[:1])  # sparse: one block cached
    assert cache.stats().entries == 1
    assert lookup(reader, queries) == expected(keys, queries)  # dense: the file, resident
    assert cache.stats().entries == 1
    assert cache.stats().bytes > 3300 * 20  # one entry holding every key
    assert lookup(reader, keys[-3:]) == expected(keys, keys[-3:])  # sparse, from it too
    scanned, _ = reader.scan()
    assert scanned.to_arrow().to_pylist() == sorted(keys)


def test_a_file_too_large_for_the_cache_stays_in_blocks(local_storage: Storage) -> None:
    keys = uuid_keys(20_000)
    local_storage.write("s/base.tmi", shard_of_keys(keys, block_bytes=8192))
    cache = BlockCache(budget_bytes=400 << 10)  # holds the decoded file, not four times it
    reader = ShardReader.open(local_storage, "s/base.tmi", cache)
    queries = keys[::50]

    assert lookup(reader, queries) == expected(keys, queries)
    assert cache.stats().entries > 1 and cache.stats().bytes <= 400 << 10
    local_storage.requests.reset()
    assert lookup(reader, queries[:1]) == expected(keys, queries[:1])
    assert local_storage.requests.snapshot() == {}  # its block is still cached


@pytest.mark.parametrize(
    "keys",
    [
        uuid_keys(70_000, seed=4),  # uniform prefixes: buckets of about 32
        [f"{i * 7:08d}-{i}" for i in range(70_000)],  # text prefixes crowded in few buckets
    ],
    ids=["uuids", "crowded text"],
)
def test_a_large_resident_file_searched_through_its_bucket_directory(keys: list[str]) -> None:
    reader = ShardReader.from_bytes(shard_of_keys(keys, block_bytes=65536), BlockCache())
    queries = [*keys[::3], *keys[-5:], "0", "99999999", "~", *uuid_keys(300, seed=8)]
    queries += [key[:-1] for key in keys[::997]] + [key + "0" for key in keys[::991]]

    assert lookup(reader, queries) == expected(keys, queries)
