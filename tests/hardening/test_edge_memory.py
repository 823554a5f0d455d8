"""Floods a real ``tidemark serve`` process must survive with its memory bounded: big
requests without a token, requests over their method's limit with one, and an Arrow
stream compressed to a few hundred kilobytes that would decode to hundreds of megabytes.
The server keeps the default 64 MiB message limit; its resident set is read from
/proc while the floods run, and its health must answer throughout."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import grpc
import pyarrow as pa
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tidemark.proto.common.v1.common_pb2 import TableRef
from tidemark.proto.index.v1 import index_service_pb2 as index_pb
from tidemark.proto.marker.v1 import marker_service_pb2 as marker_pb

from .fuzzkit import AUTH, FuzzedServer

MIB = 1 << 20
SERVER_ENV = {"TIDEMARK_MAX_MESSAGE_BYTES": str(64 * MIB)}
FLOOD_S = 3.0
FLOODERS = 4
RSS_GROWTH_BOUND_MIB = 150
"""Before these limits, the same floods grew the marker service by 2.2 GiB and the
index service by 5 GiB."""


def flood(
    server: FuzzedServer, send: Callable[[], grpc.StatusCode]
) -> tuple[Counter[grpc.StatusCode], int]:
    """``send`` from ``FLOODERS`` threads for ``FLOOD_S`` while the server's health is
    checked every 0.2 s: the codes answered and the peak RSS growth in MiB."""
    send()  # first-call costs (imports, buffers) are not growth
    base = server.rss_kib()
    codes: Counter[grpc.StatusCode] = Counter()
    stop = threading.Event()

    def flooder() -> None:
        while not stop.is_set():
            code = send()
            codes[code] += 1

    threads = [threading.Thread(target=flooder) for _ in range(FLOODERS)]
    for thread in threads:
        thread.start()
    peak = base
    health = health_pb2_grpc.HealthStub(grpc.insecure_channel(server.process.address))
    deadline = time.monotonic() + FLOOD_S
    try:
        while time.monotonic() < deadline:
            answer = health.Check(health_pb2.HealthCheckRequest(), timeout=5)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING
            peak = max(peak, server.rss_kib())
            time.sleep(0.2)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    return codes, (peak - base) // 1024


def unary(server: FuzzedServer, method: str, payload: bytes, *, token: bool) -> grpc.StatusCode:
    call = server.channel.unary_unary(method, None, None)
    try:
        call(payload, timeout=30, metadata=(AUTH,) if token else ())
    except grpc.RpcError as error:
        return error.code()
    return grpc.StatusCode.OK


def big_create_markers(table: Path, size: int) -> bytes:
    """A well-formed CreateMarkersRequest of about ``size`` bytes."""
    name = "f" * 60 + ".parquet"
    count = size // (len(name) + 8)
    request = marker_pb.CreateMarkersRequest(
        table=TableRef(base_path=str(table)),
        instant_time="20240101000000000",
        markers=[marker_pb.Marker(data_file_name=name, io_type=marker_pb.IO_TYPE_CREATE)] * count,
    )
    return request.SerializeToString()


def test_create_markers_floods_keep_the_marker_service_small(table: Path) -> None:
    """Without a token a request under its method's limit is refused before it is read,
    one over the limit by gRPC itself; with a token too."""
    server = FuzzedServer("marker", table.parent, env=SERVER_ENV)
    method = "/tidemark.marker.v1.MarkerService/CreateMarkers"
    try:
        for size, token, refused in (
            (3 * MIB, False, grpc.StatusCode.UNAUTHENTICATED),
            (8 * MIB, False, grpc.StatusCode.RESOURCE_EXHAUSTED),
            (8 * MIB, True, grpc.StatusCode.RESOURCE_EXHAUSTED),
        ):
            payload = big_create_markers(table, size)
            codes, growth = flood(
                server,
                lambda: unary(server, method, payload, token=token),  # noqa: B023
            )
            print(f"{size // MIB} MiB CreateMarkers, token={token}: {dict(codes)}, +{growth} MiB")
            assert set(codes) == {refused}, codes
            assert growth < RSS_GROWTH_BOUND_MIB, f"RSS grew {growth} MiB"
    finally:
        server.close()


def compressed_keys(keys: int, key_bytes: int) -> bytes:
    """An Arrow IPC stream of ``keys`` keys of ``key_bytes``, zstd-compressed."""
    one = pa.array(["k" * key_bytes])
    table = pa.table({"key": one.take(pa.array([0] * keys))})
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression="zstd")
    with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def test_a_compressed_arrow_bomb_is_refused_before_it_is_decoded(table: Path) -> None:
    server = FuzzedServer("index", table.parent, env=SERVER_ENV)
    try:
        keys = compressed_keys(50_000, 4096)
        assert len(keys) < MIB  # about 200 MB once decoded
        payload = index_pb.LookupRequest(
            table=TableRef(base_path=str(table)), keys=keys
        ).SerializeToString()
        method = "/tidemark.index.v1.IndexService/Lookup"
        codes, growth = flood(server, lambda: unary(server, method, payload, token=True))
        print(f"compressed Arrow bomb: {dict(codes)}, +{growth} MiB")
        assert set(codes) == {grpc.StatusCode.INVALID_ARGUMENT}, codes
        assert growth < RSS_GROWTH_BOUND_MIB, f"RSS grew {growth} MiB"
        with pytest.raises(grpc.RpcError) as error:
            server.channel.unary_unary(method, None, None)(payload, metadata=(AUTH,))
        assert "would decode to" in str(error.value.details())
    finally:
        server.close()
