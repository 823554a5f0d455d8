"""The index service on real gRPC servers (loopback, ephemeral ports): lookups agree with
the engine, staged changes show exactly when their instant completes, bad input is one
status naming its field and changes nothing, and the runtime serves it."""

from __future__ import annotations

import hashlib
import os
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import grpc
import numpy as np
import pyarrow as pa
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidemark.index import layout
from tidemark.index.record_index import RecordIndex
from tidemark.proto.common.v1.common_pb2 import TableRef
from tidemark.proto.index.v1 import index_service_pb2 as pb
from tidemark.proto.index.v1.index_service_pb2_grpc import IndexServiceStub
from tidemark.rpc import arrow_ipc
from tidemark.rpc.client import channel_for
from tidemark.rpc.embedded import EmbeddedServer
from tidemark.rpc.process import ServeProcess
from tidemark.rpc.status import ERROR_FIELD_KEY
from tidemark.services.index import FULL_NAME
from tidemark.services.index.embedded import start_embedded_index_service
from tidemark.storage import open_storage

from .conftest import MAX_BATCH_KEYS
from .indexkit import Commits
from .servicekit import (
    BUILT_AS_OF,
    KEYS,
    SHARDS,
    changes_payload,
    create_table,
    keys_payload,
    location_of,
    scrape,
)

MARKER_FULL_NAME = "tidemark.marker.v1.MarkerService"


def lookup(stub: IndexServiceStub, table: str, keys: list[str], as_of: str = "") -> pa.Table:
    request = pb.LookupRequest(
        table=TableRef(base_path=table), keys=keys_payload(keys), as_of_instant=as_of
    )
    response = stub.Lookup(request, timeout=30)
    located = arrow_ipc.decode(response.locations, field="locations", max_bytes=1 << 30)
    assert response.found == len(located) - located["partition"].null_count
    return pa.table(
        {"key": pa.array(keys, pa.string())}
        | {name: located[name].cast(pa.string()) for name in ("partition", "file_id", "instant")}
    )


def engine_lookup(table: str, keys: list[str]) -> pa.Table:
    """The engine's answer with its dictionary-encoded locations decoded, as the service's."""
    located = RecordIndex.open(open_storage(table)).lookup(pa.array(keys, pa.string()))
    return located.cast(pa.schema([(name, pa.string()) for name in located.column_names]))


def rows(located: pa.Table) -> dict[str, tuple[str, str, str] | None]:
    return {
        row["key"]: None
        if row["partition"] is None
        else (row["partition"], row["file_id"], row["instant"])
        for row in located.to_pylist()
    }


def tree(root: str) -> dict[str, str]:
    """Every file under ``root`` with a digest of its content."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(Path(root).rglob("*"))
        if path.is_file()
    }


def error_of(caught: pytest.ExceptionInfo[grpc.RpcError]) -> tuple[grpc.StatusCode, str | None]:
    error = caught.value
    assert isinstance(error, grpc.Call)
    return error.code(), dict(error.trailing_metadata() or ()).get(ERROR_FIELD_KEY)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    chosen=st.lists(
        st.one_of(
            st.sampled_from(KEYS),
            st.text(
                st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=40
            ),
        ),
        min_size=1,
        max_size=60,
    )
)
def test_lookups_agree_with_the_engine(
    indexed_table: str, index_stub: IndexServiceStub, chosen: list[str]
) -> None:
    through_service = lookup(index_stub, indexed_table, chosen)

    assert through_service.equals(engine_lookup(indexed_table, chosen))
    for key, location in rows(through_service).items():
        expected = (*location_of(key), BUILT_AS_OF) if key in KEYS else None
        assert location == expected


def test_stream_lookup_answers_each_batch_in_order(
    indexed_table: str, index_stub: IndexServiceStub
) -> None:
    batches = [KEYS[:100], ["absent-1", KEYS[150], "absent-2"], KEYS[100:]]
    requests = [pb.StreamLookupRequest(table=TableRef(base_path=indexed_table))]
    requests[0].keys = keys_payload(batches[0])
    requests += [pb.StreamLookupRequest(keys=keys_payload(batch)) for batch in batches[1:]]

    responses = list(index_stub.StreamLookup(iter(requests), timeout=30))

    assert [response.found for response in responses] == [100, 1, len(KEYS) - 100]
    for batch, response in zip(batches, responses, strict=True):
        located = arrow_ipc.decode(response.locations, field="locations", max_bytes=1 << 30)
        expected = engine_lookup(indexed_table, batch)
        assert located["file_id"].cast(pa.string()).equals(expected["file_id"])


def test_a_stream_cannot_switch_tables(
    indexed_table: str, index_stub: IndexServiceStub, tmp_path: Path
) -> None:
    (tmp_path / ".hoodie").mkdir()
    (tmp_path / ".hoodie" / "hoodie.properties").write_text("hoodie.table.name=other\n")
    requests = [
        pb.StreamLookupRequest(table=TableRef(base_path=indexed_table), keys=keys_payload(["a"])),
        pb.StreamLookupRequest(table=TableRef(base_path=str(tmp_path)), keys=keys_payload(["a"])),
    ]
    with pytest.raises(grpc.RpcError) as caught:
        list(index_stub.StreamLookup(iter(requests), timeout=30))
    assert error_of(caught) == (grpc.StatusCode.INVALID_ARGUMENT, "table.base_path")


def stage(stub: IndexServiceStub, table: str, instant: str, changes: bytes) -> int:
    request = pb.StageChangesRequest(
        table=TableRef(base_path=table), instant_time=instant, changes=changes
    )
    return stub.StageChanges(request, timeout=30).staged


def test_staged_changes_show_when_their_instant_completes(
    indexed_table: str, index_stub: IndexServiceStub
) -> None:
    commits = Commits(open_storage(indexed_table))
    instant = commits.start()
    changes = [("new-key", "dt=2024-02-01", "new-group-0"), (KEYS[0], None, None)]
    changes.append((KEYS[1], "dt=2024-02-01", "new-group-0"))
    asked = ["new-key", KEYS[0], KEYS[1]]
    before = rows(lookup(index_stub, indexed_table, asked))

    assert stage(index_stub, indexed_table, instant, changes_payload(changes)) == 3
    assert stage(index_stub, indexed_table, instant, changes_payload(changes)) == 3
    assert rows(lookup(index_stub, indexed_table, asked)) == before

    commits.complete(instant)

    assert rows(lookup(index_stub, indexed_table, asked, as_of=instant)) == {
        "new-key": ("dt=2024-02-01", "new-group-0", instant),
        KEYS[0]: None,
        KEYS[1]: ("dt=2024-02-01", "new-group-0", instant),
    }
    assert lookup(index_stub, indexed_table, KEYS, as_of=instant).equals(
        engine_lookup(indexed_table, KEYS)
    )


def test_changes_of_an_instant_that_never_completes_never_show(
    indexed_table: str, index_stub: IndexServiceStub
) -> None:
    commits = Commits(open_storage(indexed_table))
    abandoned = commits.start()
    stage(index_stub, indexed_table, abandoned, changes_payload([(KEYS[2], None, None)]))
    discard = pb.DiscardInstantRequest(
        table=TableRef(base_path=indexed_table), instant_time=abandoned
    )

    assert index_stub.DiscardInstant(discard, timeout=30).discarded
    assert not index_stub.DiscardInstant(discard, timeout=30).discarded
    later = commits.start()
    commits.complete(later)

    assert rows(lookup(index_stub, indexed_table, [KEYS[2]], as_of=later)) == {
        KEYS[2]: (*location_of(KEYS[2]), BUILT_AS_OF)
    }


def test_a_completed_instant_cannot_be_discarded(
    indexed_table: str, index_stub: IndexServiceStub
) -> None:
    commits = Commits(open_storage(indexed_table))
    instant = commits.start()
    stage(index_stub, indexed_table, instant, changes_payload([(KEYS[3], None, None)]))
    commits.complete(instant)
    discard = pb.DiscardInstantRequest(
        table=TableRef(base_path=indexed_table), instant_time=instant
    )

    with pytest.raises(grpc.RpcError) as caught:
        index_stub.DiscardInstant(discard, timeout=30)

    assert error_of(caught) == (grpc.StatusCode.FAILED_PRECONDITION, "instant")
    assert rows(lookup(index_stub, indexed_table, [KEYS[3]], as_of=instant)) == {KEYS[3]: None}


NOT_ARROW = b"not an arrow stream"


def out_of_bounds_offsets() -> bytes:
    """A keys payload whose last string offset points far past its data buffer."""
    payload = keys_payload(["aaaa", "bbbb"])
    offsets = np.array([0, 4, 8], np.int32).tobytes()
    assert payload.count(offsets) == 1
    return payload.replace(offsets, np.array([0, 4, 1 << 20], np.int32).tobytes())


NOT_UTF8 = arrow_ipc.encode(pa.table({"key": pa.array([b"ok", b"\xff\xfe"]).view(pa.string())}))


@pytest.mark.parametrize(
    ("method", "request_fields", "code", "field"),
    [
        ("Lookup", {"keys": keys_payload([])}, grpc.StatusCode.INVALID_ARGUMENT, "keys"),
        ("Lookup", {"keys": keys_payload(["a", ""])}, grpc.StatusCode.INVALID_ARGUMENT, "keys[1]"),
        (
            "Lookup",
            {"keys": keys_payload(["a", "b", "c\x00"])},
            grpc.StatusCode.INVALID_ARGUMENT,
            "keys[2]",
        ),
        (
            "Lookup",
            {"keys": keys_payload(["k"] * (MAX_BATCH_KEYS + 1))},
            grpc.StatusCode.INVALID_ARGUMENT,
            "keys",
        ),
        (
            "Lookup",
            {"keys": keys_payload(["a", "k" * 1025])},
            grpc.StatusCode.INVALID_ARGUMENT,
            "keys[1]",
        ),
        (
            "StageChanges",
            {"instant_time": BUILT_AS_OF, "changes": changes_payload([("k" * 1025, "p", "f")])},
            grpc.StatusCode.INVALID_ARGUMENT,
            "changes[0].key",
        ),
        ("Lookup", {"keys": NOT_ARROW}, grpc.StatusCode.INVALID_ARGUMENT, "keys"),
        ("Lookup", {"keys": out_of_bounds_offsets()}, grpc.StatusCode.INVALID_ARGUMENT, "keys"),
        ("Lookup", {"keys": NOT_UTF8}, grpc.StatusCode.INVALID_ARGUMENT, "keys"),
        (
            "Lookup",
            {"keys": arrow_ipc.encode(pa.table({"id": [1]}))},
            grpc.StatusCode.INVALID_ARGUMENT,
            "keys",
        ),
        (
            "Lookup",
            {"keys": keys_payload(["a"]), "as_of_instant": "2024"},
            grpc.StatusCode.INVALID_ARGUMENT,
            "as_of_instant",
        ),
        (
            "StageChanges",
            {"instant_time": "x", "changes": changes_payload([("a", "p", "f")])},
            grpc.StatusCode.INVALID_ARGUMENT,
            "instant_time",
        ),
        (
            "StageChanges",
            {"instant_time": BUILT_AS_OF, "changes": changes_payload([("a", "p", None)])},
            grpc.StatusCode.INVALID_ARGUMENT,
            "changes[0]",
        ),
        (
            "StageChanges",
            {
                "instant_time": BUILT_AS_OF,
                "changes": changes_payload([("a", "p", "f"), ("a", None, None)]),
            },
            grpc.StatusCode.INVALID_ARGUMENT,
            "changes",
        ),
        ("DiscardInstant", {"instant_time": ""}, grpc.StatusCode.INVALID_ARGUMENT, "instant_time"),
    ],
)
def test_bad_input_is_refused_naming_the_field_and_changes_nothing(
    indexed_table: str,
    index_stub: IndexServiceStub,
    method: str,
    request_fields: dict[str, object],
    code: grpc.StatusCode,
    field: str,
) -> None:
    message_class = getattr(pb, f"{method}Request")
    request = message_class(table=TableRef(base_path=indexed_table), **request_fields)
    before = tree(indexed_table)

    with pytest.raises(grpc.RpcError) as caught:
        getattr(index_stub, method)(request, timeout=30)

    assert error_of(caught) == (code, field)
    assert tree(indexed_table) == before


@pytest.fixture
def plain_table(tmp_path: Path) -> str:
    """A Hudi table without a record index."""
    return create_table(str(tmp_path / "plain")).uri


@pytest.mark.parametrize(
    ("table", "code", "field"),
    [
        ("", grpc.StatusCode.INVALID_ARGUMENT, "table.base_path"),
        ("relative/table", grpc.StatusCode.INVALID_ARGUMENT, "table.base_path"),
        ("{tmp}/missing", grpc.StatusCode.NOT_FOUND, "table"),
        ("{tmp}/empty-folder", grpc.StatusCode.NOT_FOUND, "table"),
        ("{plain}", grpc.StatusCode.FAILED_PRECONDITION, "table"),
    ],
)
def test_a_table_that_cannot_be_served_is_named(
    index_stub: IndexServiceStub,
    plain_table: str,
    tmp_path: Path,
    table: str,
    code: grpc.StatusCode,
    field: str,
) -> None:
    (tmp_path / "empty-folder").mkdir()
    before = tree(str(tmp_path))
    base_path = table.format(tmp=tmp_path, plain=plain_table)

    for call in (
        lambda ref: index_stub.Lookup(pb.LookupRequest(table=ref, keys=keys_payload(["a"]))),
        lambda ref: index_stub.Stats(pb.StatsRequest(table=ref)),
    ):
        with pytest.raises(grpc.RpcError) as caught:
            call(TableRef(base_path=base_path))
        assert error_of(caught) == (code, field)
    assert tree(str(tmp_path)) == before


def test_build_status_follows_the_build(
    index_stub: IndexServiceStub, plain_table: str, indexed_table: str
) -> None:
    def status(table: str) -> pb.BuildStatusResponse:
        return index_stub.BuildStatus(
            pb.BuildStatusRequest(table=TableRef(base_path=table)), timeout=30
        )

    assert status(plain_table) == pb.BuildStatusResponse()
    storage = open_storage(plain_table)
    storage.write(layout.base_path(0, BUILT_AS_OF), b"a shard of an unpublished build")
    assert status(plain_table) == pb.BuildStatusResponse(build_in_progress=True)
    assert status(indexed_table) == pb.BuildStatusResponse(
        exists=True,
        shards=SHARDS,
        as_of_instant=BUILT_AS_OF,
        format_version=layout.FORMAT_VERSION,
    )


def test_stats_and_metrics_count_entries_keys_and_cache_hits(
    indexed_table: str, index_service: EmbeddedServer, index_stub: IndexServiceStub
) -> None:
    lookup(index_stub, indexed_table, [*KEYS[:10], "absent"])
    lookup(index_stub, indexed_table, [*KEYS[:10], "absent"])

    stats = index_stub.Stats(pb.StatsRequest(table=TableRef(base_path=indexed_table)))

    assert (stats.entries, stats.shards) == (len(KEYS), SHARDS)
    assert stats.bytes == sum(
        path.stat().st_size for path in Path(indexed_table, layout.SHARDS_DIR).rglob("*.tmi")
    )
    cache = stats.block_cache
    assert cache.hits > 0 and cache.misses > 0
    assert cache.hit_rate == pytest.approx(cache.hits / (cache.hits + cache.misses))
    assert 0 < cache.bytes <= cache.capacity_bytes
    samples = scrape(index_service.metrics_port)
    assert samples["tidemark_index_keys_total{found}"] == 20
    assert samples["tidemark_index_keys_total{absent}"] == 2
    assert samples["tidemark_index_lookup_seconds_count"] == 2
    assert samples["tidemark_index_tables_open"] == 1
    assert samples["tidemark_index_block_cache_hit_ratio"] > 0


def listed_services(address: str) -> set[str]:
    with channel_for(address) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        (response,) = list(stub.ServerReflectionInfo(iter([request]), timeout=10))
        return {service.name for service in response.list_services_response.service}


def health(address: str, service: str) -> int:
    with channel_for(address) as channel:
        request = health_pb2.HealthCheckRequest(service=service)
        return health_pb2_grpc.HealthStub(channel).Check(request, timeout=10).status


def test_health_and_reflection_list_the_service(index_service: EmbeddedServer) -> None:
    assert FULL_NAME in listed_services(index_service.address)
    assert health(index_service.address, FULL_NAME) == health_pb2.HealthCheckResponse.SERVING


@pytest.fixture
def served_all() -> Iterator[ServeProcess]:
    process = ServeProcess("all", args=("--log-level", "error"))
    yield process
    process.close()


def test_serve_all_runs_the_index_service_next_to_the_marker_service(
    served_all: ServeProcess, indexed_table: str
) -> None:
    assert {FULL_NAME, MARKER_FULL_NAME} <= listed_services(served_all.address)
    with channel_for(served_all.address) as channel:
        located = lookup(IndexServiceStub(channel), indexed_table, [KEYS[5], "absent"])
    assert rows(located) == {KEYS[5]: (*location_of(KEYS[5]), BUILT_AS_OF), "absent": None}


def free_port_pair() -> int:
    """A port P with P and P + 1 free (the metrics ports of two workers)."""
    while True:
        with socket.socket() as first, socket.socket() as second:
            first.bind(("127.0.0.1", 0))
            port = first.getsockname()[1]
            try:
                second.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return int(port)


def children_of(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def test_workers_share_the_port_and_stop_together(indexed_table: str) -> None:
    metrics_port = free_port_pair()
    served = ServeProcess(
        "index",
        args=("--workers", "2", "--metrics-port", str(metrics_port), "--log-level", "error"),
    )
    try:
        for _ in range(24):
            with channel_for(served.address) as channel:
                lookup(IndexServiceStub(channel), indexed_table, [KEYS[0], "absent"])
        found = [
            scrape(port).get("tidemark_index_keys_total{found}", 0.0)
            for port in (metrics_port, metrics_port + 1)
        ]
        (worker,) = children_of(served.pid)
        os.kill(worker, signal.SIGKILL)
        assert served.process.wait(timeout=60) == 1
    finally:
        if served.process.poll() is None:
            served.kill()
    assert sum(found) == 24
    assert min(found) > 0, "the kernel spread 24 connections over both workers"


def test_a_table_outside_the_allowed_roots_is_refused(indexed_table: str, tmp_path: Path) -> None:
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    with (
        start_embedded_index_service(allowed_roots=[str(allowed)]) as service,
        channel_for(service.address) as channel,
        pytest.raises(grpc.RpcError) as caught,
    ):
        lookup(IndexServiceStub(channel), indexed_table, [KEYS[0]])
    assert error_of(caught) == (grpc.StatusCode.PERMISSION_DENIED, "table.base_path")
    assert "not under an allowed root" in (caught.value.details() or "")
