"""Requests far over their method's limit sent to a real ``tidemark serve`` process, as
issue 52 sent them: gRPC refuses each before its bytes are buffered, because each
method's port has its class's receive limit (health and the small methods 16 KiB), and a
token below a method's role is refused before its request is read. Memory is judged by
the server's peak resident set (VmHWM, /proc/<pid>/status), which a sample between
floods would miss."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tidemark.config import ClientConfig
from tidemark.proto.common.v1.common_pb2 import TableRef
from tidemark.proto.index.v1 import index_service_pb2 as index_pb
from tidemark.proto.marker.v1 import marker_service_pb2 as marker_pb
from tidemark.rpc.client import channel_for
from tidemark.rpc.process import ServeProcess

MIB = 1 << 20
READ_TOKEN = "read-token-0123456789"
PEAK_BOUND_MIB = 768
"""Issue 52's bound for the index service (its chart limit is 2 GiB). Before the ports
per class: 3,046 MiB after the health flood, 1,023-1,344 MiB after the BuildStatus one."""
HUGE = 60_000_000
"""Bytes of each oversized request, as in the issue."""


def serve(service: str, table: Path) -> ServeProcess:
    """``service`` with the default 64 MiB message limit and a read-only token."""
    tokens = table.parent.parent / "tokens"
    tokens.write_text(f"{READ_TOKEN} name=reader role=read\n")
    return ServeProcess(
        service,
        env={"TIDEMARK_MAX_MESSAGE_BYTES": str(64 * MIB)},
        args=["--allowed-root", str(table.parent), "--auth-token-file", str(tokens)],
    )


def peak_mib(process: ServeProcess) -> int:
    for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
    raise AssertionError("no VmHWM")


def send_at_once(
    process: ServeProcess, method: str, payload: bytes, callers: int, token: str | None
) -> Counter[tuple[grpc.StatusCode, str]]:
    """``callers`` threads, each on a connection of its own, sending ``payload`` once;
    the (code, details) they got."""
    answers: Counter[tuple[grpc.StatusCode, str]] = Counter()
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    config = ClientConfig(max_message_bytes=2 * HUGE)

    def caller() -> None:
        with channel_for(process.address, config=config) as channel:
            try:
                channel.unary_unary(method)(payload, timeout=120, metadata=metadata)
                answers[grpc.StatusCode.OK, ""] += 1
            except grpc.RpcError as error:
                answers[error.code(), error.details() or ""] += 1

    threads = [threading.Thread(target=caller) for _ in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def assert_serving(process: ServeProcess) -> None:
    with grpc.insecure_channel(process.address) as channel:
        answer = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=10
        )
    assert answer.status == health_pb2.HealthCheckResponse.SERVING


def test_huge_health_checks_and_small_calls_are_refused_before_they_are_read(
    table: Path,
) -> None:
    """24 health checks naming a 60 MB service without a token, then 8 BuildStatus of
    60 MB with a read token: gRPC refuses each unread, at the small port's limit."""
    process = serve("index", table)
    try:
        health = health_pb2.HealthCheckRequest(service="x" * HUGE).SerializeToString()
        answers = send_at_once(process, "/grpc.health.v1.Health/Check", health, 24, None)
        print(f"24 x 60 MB Health/Check: {dict(answers)}, VmHWM {peak_mib(process)} MiB")
        assert {code for code, _ in answers} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
        assert peak_mib(process) < PEAK_BOUND_MIB
        status = index_pb.BuildStatusRequest(
            table=TableRef(base_path="/" + "x" * HUGE)
        ).SerializeToString()
        method = "/tidemark.index.v1.IndexService/BuildStatus"
        answers = send_at_once(process, method, status, 8, READ_TOKEN)
        print(f"8 x 60 MB BuildStatus: {dict(answers)}, VmHWM {peak_mib(process)} MiB")
        assert {code for code, _ in answers} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
        assert peak_mib(process) < PEAK_BOUND_MIB
        assert_serving(process)
    finally:
        process.close()


def test_a_read_token_is_refused_create_markers_before_it_is_read(table: Path) -> None:
    """A 4 MB CreateMarkers of 2,000,000 empty markers needs write: a read token is
    refused by admission ("on any table"), not by the table check that follows the
    parse ("on this table"), and the server's peak grows by less than one parse."""
    process = serve("marker", table)
    try:
        request = marker_pb.CreateMarkersRequest(
            table=TableRef(base_path=str(table)),
            instant_time="20240101000000000",
            markers=[marker_pb.Marker()] * 2_000_000,
        ).SerializeToString()
        assert len(request) <= 4 * MIB  # under the method's limit: the role refuses it
        before = peak_mib(process)
        method = "/tidemark.marker.v1.MarkerService/CreateMarkers"
        answers = send_at_once(process, method, request, 8, READ_TOKEN)
        grown = peak_mib(process) - before
        print(f"8 x 4 MB CreateMarkers with a read token: {dict(answers)}, VmHWM +{grown} MiB")
        assert set(answers) == {
            (
                grpc.StatusCode.PERMISSION_DENIED,
                "authorization: the caller's credentials do not grant write on any table",
            )
        }
        assert grown < 32, f"VmHWM grew {grown} MiB"
        assert_serving(process)
    finally:
        process.close()
