"""Fuzzing every RPC of the marker service (a real ``tidemark serve marker`` process,
marker-dir leases renewed only every 20 minutes so only calls change files): see
``fuzzkit.fuzz_service`` for what is sent and checked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st
from planner.plankit import new_table

from tidemark.proto.common.v1.common_pb2 import TableRef
from tidemark.proto.marker.v1 import marker_service_pb2 as pb
from tidemark.storage import open_storage
from tidemark.table.leases.storage_lease import LockHolder, StorageLease

from .fuzzkit import PRECONDITION, FuzzedServer, Rpc, fuzz_service, mostly, odd_text, texts_or

SERVICE = "tidemark.marker.v1.MarkerService"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzedServer]:
    root = tmp_path_factory.mktemp("fuzz-marker")
    new_table(root, {"eu": [5]})
    fuzzed = FuzzedServer("marker", root, {"TIDEMARK_MARKER_LEASE_S": "3600"})
    yield fuzzed
    fuzzed.close()


@pytest.fixture(scope="module")
def holder(server: FuzzedServer) -> Iterator[LockHolder]:
    """The table lock, held for the whole run (one long lease, no renewals: nothing
    writes under the root but the calls), so DeleteMarkerDir can be valid."""
    lock = StorageLease(open_storage(str(server.root / "people")), "fuzzer", 3600, heartbeat=False)
    lock.acquire()
    assert lock.holder is not None
    yield lock.holder
    lock.release()


CREATE = Rpc(f"/{SERVICE}/CreateMarker", also=PRECONDITION)
CREATE_MANY = Rpc(f"/{SERVICE}/CreateMarkers", also=PRECONDITION)
LIST = Rpc(f"/{SERVICE}/ListMarkers", response_stream=True, also=PRECONDITION)
EXISTS = Rpc(f"/{SERVICE}/MarkerDirExists", also=PRECONDITION)
DELETE = Rpc(f"/{SERVICE}/DeleteMarkerDir", also=PRECONDITION)
INSTANT = "20240102030405006"
FILE = "aaaa-0_0-1-0_20240102030405006.parquet"


def _valid(root: Path, holder: LockHolder) -> dict[Rpc, bytes]:
    table = TableRef(base_path=str(root / "people"))
    marker = pb.Marker(partition_path="eu", data_file_name=FILE, io_type=pb.IO_TYPE_CREATE)
    common: dict[str, Any] = {"table": table, "instant_time": INSTANT}
    lock = pb.TableLockHolder(generation=holder.generation, token=holder.token)
    return {
        CREATE: pb.CreateMarkerRequest(marker=marker, **common).SerializeToString(),
        CREATE_MANY: pb.CreateMarkersRequest(markers=[marker], **common).SerializeToString(),
        LIST: pb.ListMarkersRequest(filter=pb.MARKER_FILTER_ALL, **common).SerializeToString(),
        EXISTS: pb.MarkerDirExistsRequest(**common).SerializeToString(),
        DELETE: pb.DeleteMarkerDirRequest(table_lock=lock, **common).SerializeToString(),
    }


def _rpcs(root: Path, holder: LockHolder) -> dict[Rpc, st.SearchStrategy[bytes]]:
    table = st.builds(TableRef, base_path=texts_or(str(root / "people"), str(root)))
    marker = st.builds(
        pb.Marker,
        partition_path=texts_or("eu", "us", "eu/x"),
        data_file_name=texts_or(FILE, "bbbb-0_1-1-0_20240102030405006.parquet"),
        io_type=mostly(st.sampled_from([1, 2, 3]), st.integers(-3, 9)),
    )
    common = {"table": table, "instant_time": texts_or(INSTANT, "20240102030405", "0" * 17)}
    return {
        CREATE: st.builds(pb.CreateMarkerRequest, marker=marker, **common).map(
            pb.CreateMarkerRequest.SerializeToString
        ),
        CREATE_MANY: st.builds(
            pb.CreateMarkersRequest, markers=st.lists(marker, max_size=30), **common
        ).map(pb.CreateMarkersRequest.SerializeToString),
        LIST: st.builds(
            pb.ListMarkersRequest,
            filter=mostly(st.sampled_from([1, 2, 3]), st.integers(-3, 9)),
            **common,
        ).map(pb.ListMarkersRequest.SerializeToString),
        EXISTS: st.builds(pb.MarkerDirExistsRequest, **common).map(
            pb.MarkerDirExistsRequest.SerializeToString
        ),
        DELETE: st.builds(
            pb.DeleteMarkerDirRequest,
            table_lock=mostly(
                st.just(pb.TableLockHolder(generation=holder.generation, token=holder.token)),
                st.builds(
                    pb.TableLockHolder,
                    generation=st.integers(-(1 << 63), (1 << 63) - 1),
                    token=odd_text(),
                ),
            ),
            **common,
        ).map(pb.DeleteMarkerDirRequest.SerializeToString),
    }


def test_the_marker_service_answers_fuzzed_calls_with_defined_codes(
    server: FuzzedServer, holder: LockHolder
) -> None:
    rpcs, valid = _rpcs(server.root, holder), _valid(server.root, holder)
    fuzz_service(server, rpcs, valid, [SERVICE], examples=150, probe=EXISTS)
