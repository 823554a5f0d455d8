"""IndexClient against real services: batched and streamed lookups agree with the engine,
staging in chunks, picklable for executors, errors come back as the server's domain
errors, an unreachable service is named."""

from __future__ import annotations

import pickle
import socket

import pyarrow as pa
import pytest

from tidemark.clients.index import IndexClient
from tidemark.config import ClientConfig
from tidemark.errors import FailedPreconditionError, InvalidArgumentError, UnavailableError
from tidemark.index.record_index import RecordIndex
from tidemark.index.sharding import shard_of
from tidemark.rpc.embedded import EmbeddedServer
from tidemark.services.index.embedded import start_embedded_index_service
from tidemark.storage import open_storage
from tidemark.testing.s3local import FaultProxy

from .indexkit import Commits
from .servicekit import (
    BUILT_AS_OF,
    KEYS,
    SHARDS,
    build_index,
    create_table,
    location_of,
    scrape,
)

FAST = ClientConfig(timeout_s=10.0, max_attempts=2, initial_backoff_s=0.01, max_backoff_s=0.02)


def closed_port_address() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


def test_lookups_in_many_batches_agree_with_one_batch_and_the_engine(
    indexed_table: str, index_service: EmbeddedServer
) -> None:
    asked = [*KEYS, "absent-1", KEYS[7], "absent-2"][::-1]
    streamed = IndexClient(index_service.address, indexed_table, FAST, batch_keys=17)
    unary = IndexClient(index_service.address, indexed_table, FAST)

    located = streamed.lookup(asked)

    assert located.equals(unary.lookup(pa.array(asked)))
    assert located.equals(streamed.lookup(pa.chunked_array([asked[:5], asked[5:]])))
    engine = RecordIndex.open(open_storage(indexed_table))
    assert located.equals(engine.lookup(pa.array(asked, pa.string())).cast(located.schema))
    assert located["key"].to_pylist() == asked
    assert located.slice(0, 1).to_pylist() == [
        {"key": "absent-2", "partition": None, "file_id": None, "instant": None}
    ]


def test_no_keys_is_an_empty_answer(indexed_table: str, index_service: EmbeddedServer) -> None:
    located = IndexClient(index_service.address, indexed_table, FAST).lookup([])
    assert located.num_rows == 0
    assert located.column_names == ["key", "partition", "file_id", "instant"]


def test_a_pickled_client_looks_up_and_stages_in_chunks(
    indexed_table: str, index_service: EmbeddedServer
) -> None:
    client = IndexClient(index_service.address, indexed_table, FAST, batch_keys=3)
    client.lookup([KEYS[0]])
    copy = pickle.loads(pickle.dumps(client))
    commits = Commits(open_storage(indexed_table))
    instant = commits.start()
    moved = [f"moved-{number}" for number in range(7)]
    changes = pa.table(
        {
            "key": [*moved, KEYS[0]],
            "partition": [*["dt=2024-03-01"] * 7, None],
            "file_id": [*["group-9"] * 7, None],
        }
    )

    assert copy.stage(instant, changes) == 8
    assert copy.lookup(moved)["file_id"].null_count == 7
    commits.complete(instant)

    located = copy.lookup([*moved, KEYS[0]], as_of=instant)
    assert located["file_id"].to_pylist() == [*["group-9"] * 7, None]
    assert set(located["instant"].to_pylist()) == {instant, None}


def test_discard_status_and_stats(indexed_table: str, index_service: EmbeddedServer) -> None:
    client = IndexClient(index_service.address, indexed_table, FAST)
    commits = Commits(open_storage(indexed_table))
    instant = commits.start()
    client.stage(instant, pa.table({"key": ["x"], "partition": ["p"], "file_id": ["f"]}))

    assert client.discard(instant)
    assert not client.discard(instant)
    status = client.status()
    assert (status.exists, status.shards, status.as_of) == (True, SHARDS, BUILT_AS_OF)
    client.lookup(KEYS[:3])
    stats = client.stats()
    assert (stats.entries, stats.shards) == (len(KEYS), SHARDS)
    assert 0 < stats.cache_hit_rate < 1


def test_server_errors_come_back_as_domain_errors_naming_the_field(
    index_service: EmbeddedServer, local_root: str
) -> None:
    create_table(local_root)
    client = IndexClient(index_service.address, local_root, FAST)

    with pytest.raises(FailedPreconditionError) as no_index:
        client.lookup(["a"])
    assert no_index.value.field == "table"
    assert "no record index" in no_index.value.message
    with pytest.raises(InvalidArgumentError) as empty_key:
        client.lookup(["a", ""])
    assert empty_key.value.field == "keys[1]"
    assert not client.status().exists


def test_an_unreachable_service_is_named(local_root: str) -> None:
    address = closed_port_address()
    client = IndexClient(address, local_root, FAST)

    with pytest.raises(UnavailableError) as caught:
        client.lookup(["a"])

    assert caught.value.field == "index_service_address"
    assert f"index service at {address} is unreachable" in str(caught.value)
    with pytest.raises(UnavailableError, match="index service"):
        client.check_reachable()


def test_keys_in_the_same_order_as_asked_whatever_the_shard(
    indexed_table: str, index_service: EmbeddedServer
) -> None:
    client = IndexClient(index_service.address, indexed_table, FAST, batch_keys=50)
    located = client.lookup(KEYS)
    assert [(row["partition"], row["file_id"]) for row in located.to_pylist()] == [
        location_of(key) for key in KEYS
    ]


def test_a_stream_broken_by_an_unavailable_shard_resumes_at_the_unanswered_batch(
    s3_bucket: str, faulty_s3: FaultProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = create_table(s3_bucket).storage
    build_index(storage, KEYS)
    by_shard: dict[int, list[str]] = {}
    for key, shard in zip(KEYS, shard_of(pa.array(KEYS), SHARDS).tolist(), strict=True):
        by_shard.setdefault(shard, []).append(key)
    (_, first), (second_shard, second) = list(by_shard.items())[:2]
    first, second = first[:4], second[:4]
    monkeypatch.setenv("TIDEMARK_STORAGE_MAX_ATTEMPTS", "1")
    faulty_s3.fail_next(1, method="GET", path_pattern=f"/shards/{second_shard:05d}/")

    with start_embedded_index_service() as service:
        client = IndexClient(service.address, s3_bucket, FAST, batch_keys=4)
        located = client.lookup([*first, *second])
        batches = scrape(service.metrics_port)["tidemark_index_lookup_keys_count"]

    assert faulty_s3.injected == 1
    assert batches == 2, "the retry sent only the batch the broken stream had not answered"
    assert [(row["partition"], row["file_id"]) for row in located.to_pylist()] == [
        location_of(key) for key in [*first, *second]
    ]


def test_long_keys_go_in_batches_that_fit_the_message_limit(
    indexed_table: str, index_service: EmbeddedServer
) -> None:
    small = ClientConfig(
        timeout_s=10.0, max_attempts=2, initial_backoff_s=0.01, max_message_bytes=64 * 1024
    )
    client = IndexClient(index_service.address, indexed_table, small)
    long_keys = [f"{number:04d}-" + "k" * 1_000 for number in range(300)]
    commits = Commits(open_storage(indexed_table))
    instant = commits.start()
    changes = pa.table(
        {"key": long_keys, "partition": ["dt=2024-03-01"] * 300, "file_id": ["group-7"] * 300}
    )

    assert client.stage(instant, changes) == 300
    commits.complete(instant)
    located = client.lookup([*long_keys, KEYS[0]], as_of=instant)

    assert located["key"].to_pylist() == [*long_keys, KEYS[0]]
    assert located["file_id"].to_pylist() == [*["group-7"] * 300, location_of(KEYS[0])[1]]
