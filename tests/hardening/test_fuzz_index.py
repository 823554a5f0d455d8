"""Fuzzing every RPC of the index service (a real ``tidemark serve index`` process, no
background compaction so only calls change files): see ``fuzzkit.fuzz_service`` for
what is sent and checked. Key and change payloads are Arrow IPC streams of odd keys,
nulls, wrong column names and types, or bytes that are no Arrow stream at all."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import strategies as st
from index.servicekit import KEYS, build_index, changes_payload, create_table, keys_payload

from tidemark.proto.common.v1.common_pb2 import TableRef
from tidemark.proto.index.v1 import index_service_pb2 as pb
from tidemark.rpc import arrow_ipc

from .fuzzkit import PRECONDITION, FuzzedServer, Rpc, fuzz_service, mostly, odd_text, texts_or

SERVICE = "tidemark.index.v1.IndexService"
LOOKUP = Rpc(f"/{SERVICE}/Lookup", also=PRECONDITION)
STREAM = Rpc(f"/{SERVICE}/StreamLookup", True, True, also=PRECONDITION)
STAGE = Rpc(f"/{SERVICE}/StageChanges", also=PRECONDITION)
DISCARD = Rpc(f"/{SERVICE}/DiscardInstant", also=PRECONDITION)
STATUS = Rpc(f"/{SERVICE}/BuildStatus", also=PRECONDITION)
STATS = Rpc(f"/{SERVICE}/Stats", also=PRECONDITION)
COMPACT = Rpc(f"/{SERVICE}/Compact", also=PRECONDITION)
PENDING = "20990101000000000"
"""An instant on no timeline: its staged changes stay invisible, and it can be discarded."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzedServer]:
    root = tmp_path_factory.mktemp("fuzz-index")
    build_index(create_table(str(root / "indexed")).storage, KEYS)
    fuzzed = FuzzedServer("index", root, {"TIDEMARK_INDEX_COMPACT_INTERVAL_S": "3600"})
    yield fuzzed
    fuzzed.close()


def _keys() -> st.SearchStrategy[bytes]:
    wrong_column = pa.table({"keys": pa.array(["a"])})
    wrong_type = pa.table({"key": pa.array([1, 2], pa.int64())})
    with_null = pa.table({"key": pa.array(["a", None])})
    return mostly(
        st.lists(mostly(st.sampled_from(KEYS), odd_text()), max_size=20).map(keys_payload),
        st.one_of(
            st.sampled_from([wrong_column, wrong_type, with_null]).map(arrow_ipc.encode),
            st.binary(max_size=100),
            st.just(keys_payload([])),
        ),
    )


def _changes() -> st.SearchStrategy[bytes]:
    location = st.one_of(
        st.just(("dt=2024-01-01", "00000001-aaaa-bbbb-cccc-dddddddddddd-0")),
        st.just((None, None)),  # a delete
        st.tuples(st.one_of(st.none(), odd_text()), st.one_of(st.none(), odd_text())),
    )
    row = st.tuples(mostly(st.sampled_from(KEYS), odd_text()), location).map(
        lambda pair: (pair[0], *pair[1])
    )
    return mostly(
        st.lists(row, min_size=1, max_size=20).map(changes_payload),
        st.one_of(st.binary(max_size=100), _keys()),
    )


def _rpcs(root: Path) -> dict[Rpc, st.SearchStrategy[bytes]]:
    table = st.builds(TableRef, base_path=texts_or(str(root / "indexed"), str(root)))
    instant = texts_or(PENDING, "20240101000000000", "2099")
    lookup: dict[str, Any] = {
        "table": table,
        "keys": _keys(),
        "as_of_instant": mostly(st.just(""), instant),
    }
    return {
        LOOKUP: st.builds(pb.LookupRequest, **lookup).map(pb.LookupRequest.SerializeToString),
        STREAM: st.builds(pb.StreamLookupRequest, **lookup).map(
            pb.StreamLookupRequest.SerializeToString
        ),
        STAGE: st.builds(
            pb.StageChangesRequest, table=table, instant_time=instant, changes=_changes()
        ).map(pb.StageChangesRequest.SerializeToString),
        DISCARD: st.builds(pb.DiscardInstantRequest, table=table, instant_time=instant).map(
            pb.DiscardInstantRequest.SerializeToString
        ),
        STATUS: st.builds(pb.BuildStatusRequest, table=table).map(
            pb.BuildStatusRequest.SerializeToString
        ),
        STATS: st.builds(pb.StatsRequest, table=table).map(pb.StatsRequest.SerializeToString),
        COMPACT: st.builds(
            pb.CompactRequest, table=table, min_deltas=st.integers(-(1 << 31), (1 << 31) - 1)
        ).map(pb.CompactRequest.SerializeToString),
    }


def _valid(root: Path) -> dict[Rpc, bytes]:
    table = TableRef(base_path=str(root / "indexed"))
    keys = keys_payload(KEYS[:5])
    change = changes_payload([(KEYS[0], "dt=2024-01-09", "00000009-aaaa-bbbb-cccc-dddddddddddd-0")])
    return {
        LOOKUP: pb.LookupRequest(table=table, keys=keys).SerializeToString(),
        STREAM: pb.StreamLookupRequest(table=table, keys=keys).SerializeToString(),
        STAGE: pb.StageChangesRequest(
            table=table, instant_time=PENDING, changes=change
        ).SerializeToString(),
        DISCARD: pb.DiscardInstantRequest(table=table, instant_time=PENDING).SerializeToString(),
        STATUS: pb.BuildStatusRequest(table=table).SerializeToString(),
        STATS: pb.StatsRequest(table=table).SerializeToString(),
        COMPACT: pb.CompactRequest(table=table, min_deltas=1).SerializeToString(),
    }


def test_the_index_service_answers_fuzzed_calls_with_defined_codes(server: FuzzedServer) -> None:
    rpcs, valid = _rpcs(server.root), _valid(server.root)
    fuzz_service(server, rpcs, valid, [SERVICE], examples=150, probe=LOOKUP)
