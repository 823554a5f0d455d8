"""The bulk request budget shared per caller, on the real index and marker services: one
team's streams that never send, or its calls that send headers and no message, hold at
most its share, so another team is answered meanwhile; and they give it back after
``request_idle_s``. The budget's use and its waiting callers are read from /metrics."""

from __future__ import annotations

import asyncio
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from index.servicekit import KEYS, build_index, create_table, keys_payload, scrape

from tidemark.config import ServerConfig
from tidemark.proto.common.v1.common_pb2 import TableRef
from tidemark.proto.index.v1 import index_service_pb2 as index_pb
from tidemark.proto.marker.v1 import marker_service_pb2 as marker_pb
from tidemark.rpc.client import channel_for
from tidemark.rpc.limits import ByteBudget
from tidemark.rpc.registry import resolve_services
from tidemark.rpc.server import RunningServer, build_server

MIB = 1 << 20
TEAM_A = "team-a-token-0001"
TEAM_B = "team-b-token-0002"
MAX_MESSAGE_BYTES = 32 * MIB
"""The index's bulk limit, so the reserve of each message read: 4 of them are 128 MiB."""
WAIT_S = 30.0
"""A guard on waits for the server's state, never a measured duration."""
FIXTURE = Path(__file__).parents[1] / "fixtures" / "hudi-v6" / "v6_nonpartitioned"


def serve(service: str, root: Path, **settings: float) -> RunningServer:
    """``service`` with team a's and team b's tokens, 128 MiB of request budget and at
    most 64 MiB of it per caller."""
    tokens = root.parent / "tokens"
    tokens.write_text(f"{TEAM_A} name=team-a role=write\n{TEAM_B} name=team-b role=write\n")
    config = ServerConfig(
        port=0,
        metrics_port=0,
        auth_token_file=str(tokens),
        allowed_roots=(str(root),),
        max_message_bytes=MAX_MESSAGE_BYTES,
        max_request_memory_bytes=128 * MIB,
        max_caller_request_memory_bytes=64 * MIB,
        **settings,  # type: ignore[arg-type]
    )
    return build_server(config, resolve_services(service))


def metadata(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


def wait_for(server: RunningServer, condition: Callable[[dict[str, float]], bool]) -> None:
    """Until the server's metrics satisfy ``condition`` (a bounded guard)."""
    deadline = time.monotonic() + WAIT_S
    while not condition(samples := scrape(server.metrics_port)):
        assert time.monotonic() < deadline, samples
        time.sleep(0.05)


def budget(samples: dict[str, float]) -> tuple[float, float, float]:
    """Bytes used, calls waiting and callers waiting."""
    return (
        samples["tidemark_request_budget_used_bytes"],
        samples["tidemark_request_budget_waiting_calls"],
        samples["tidemark_request_budget_waiting_callers"],
    )


class Silent:
    """Client streams that send nothing until ``stop``: each holds a bulk read open."""

    def __init__(self) -> None:
        self._stop = threading.Event()

    def requests(self) -> Iterator[bytes]:
        self._stop.wait(WAIT_S * 4)
        return
        yield b""  # a generator that never yields before the end

    def stop(self) -> None:
        self._stop.set()


def hold(call: Callable[..., object], silent: Silent, token: str, count: int) -> list[object]:
    """``count`` calls of ``call`` with ``silent``'s requests, started; their outcomes
    (a code, or what they answered) land in the returned list as they end."""
    outcomes: list[object] = []

    def one() -> None:
        try:
            outcomes.append(call(silent.requests(), timeout=WAIT_S * 4, metadata=metadata(token)))
        except grpc.RpcError as error:
            outcomes.append((error.code(), error.details()))

    for _ in range(count):
        threading.Thread(target=one, daemon=True).start()
    return outcomes


def stream_lookup(channel: grpc.Channel) -> Callable[..., object]:
    """A StreamLookup call that returns once its stream ended (its responses)."""
    streams = channel.stream_stream("/tidemark.index.v1.IndexService/StreamLookup", None, None)
    return lambda requests, **call: list(streams(requests, **call))


def ended(outcomes: list[object]) -> list[tuple[grpc.StatusCode, str]]:
    """The outcomes of calls that failed (code, details); an answer fails the test."""
    assert all(isinstance(outcome, tuple) for outcome in outcomes), outcomes
    return [outcome for outcome in outcomes if isinstance(outcome, tuple)]


@pytest.fixture
def indexed(local_root: str) -> str:
    build_index(create_table(local_root).storage, KEYS)
    return local_root


def test_one_teams_silent_streams_leave_another_team_answered(indexed: str) -> None:
    """Team a's four StreamLookups that never send: two hold its 64 MiB share, two wait on
    it; team b's Lookup is answered while they do."""
    server = serve("index", Path(indexed).parent)
    silent = Silent()
    try:
        with channel_for(f"127.0.0.1:{server.port}") as channel:
            outcomes = hold(stream_lookup(channel), silent, TEAM_A, 4)
            wait_for(server, lambda s: budget(s) == (64 * MIB, 2, 1))
            request = index_pb.LookupRequest(
                table=TableRef(base_path=indexed), keys=keys_payload(KEYS[:3])
            )
            lookup = channel.unary_unary(
                "/tidemark.index.v1.IndexService/Lookup",
                request_serializer=index_pb.LookupRequest.SerializeToString,
                response_deserializer=index_pb.LookupResponse.FromString,
            )
            answer = lookup(request, timeout=WAIT_S, metadata=metadata(TEAM_B))
            assert answer.found == 3
            assert budget(scrape(server.metrics_port)) == (64 * MIB, 2, 1), "a's still held"
            assert outcomes == []
    finally:
        silent.stop()
        server.stop(0)


def test_silent_streams_give_their_share_back_after_the_idle_time(indexed: str) -> None:
    server = serve("index", Path(indexed).parent, request_idle_s=0.5)
    silent = Silent()
    try:
        with channel_for(f"127.0.0.1:{server.port}") as channel:
            outcomes = hold(stream_lookup(channel), silent, TEAM_A, 4)
            wait_for(server, lambda s: s["tidemark_request_budget_idle_ends_total"] == 4)
            assert budget(scrape(server.metrics_port)) == (0, 0, 0)
            deadline = time.monotonic() + WAIT_S
            while len(outcomes) < 4:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert {outcome[0] for outcome in ended(outcomes)} == {
                grpc.StatusCode.RESOURCE_EXHAUSTED
            }, outcomes
            assert all("request_idle_s" in outcome[1] for outcome in ended(outcomes)), outcomes
    finally:
        silent.stop()
        server.stop(0)


def test_half_open_create_markers_do_not_block_another_writer(tmp_path: Path) -> None:
    """64 CreateMarkers of team a that send their headers and no message: 16 hold its
    share (4 MiB each), the others wait; team b's CreateMarkers is answered."""
    table = tmp_path / "lake" / "t"
    shutil.copytree(FIXTURE, table)
    server = serve("marker", table.parent)
    silent = Silent()
    path = "/tidemark.marker.v1.MarkerService/CreateMarkers"
    try:
        with channel_for(f"127.0.0.1:{server.port}") as channel:
            outcomes = hold(channel.stream_unary(path), silent, TEAM_A, 64)
            wait_for(server, lambda s: budget(s) == (64 * MIB, 48, 1))
            create = channel.unary_unary(
                path,
                request_serializer=marker_pb.CreateMarkersRequest.SerializeToString,
                response_deserializer=marker_pb.CreateMarkersResponse.FromString,
            )
            request = marker_pb.CreateMarkersRequest(
                table=TableRef(base_path=str(table)),
                instant_time="20240101000000000",
                markers=[
                    marker_pb.Marker(
                        data_file_name=f"f{i}.parquet", io_type=marker_pb.IO_TYPE_CREATE
                    )
                    for i in range(3)
                ],
            )
            answer = create(request, timeout=WAIT_S, metadata=metadata(TEAM_B))
            assert list(answer.created) == [True] * 3
            assert budget(scrape(server.metrics_port)) == (64 * MIB, 48, 1), "a's still held"
            assert outcomes == []
    finally:
        silent.stop()
        server.stop(0)


def test_a_caller_over_its_share_waits_alone() -> None:
    """a holds its whole share and waits for more; c waits for bytes. b's 30 freed go to
    c, whom a's wait does not hold up; a's comes once a gives its own back."""

    async def scenario() -> list[str]:
        budget = ByteBudget(capacity=100, caller_capacity=60)
        await budget.take("a", 60)
        await budget.take("b", 30)
        granted: list[str] = []

        async def take(caller: str, amount: int) -> None:
            await budget.take(caller, amount)
            granted.append(caller)

        waiting = [asyncio.create_task(take("a", 10)), asyncio.create_task(take("c", 20))]
        await asyncio.sleep(0)
        assert (budget.waiting_calls, budget.waiting_callers, granted) == (2, 2, [])
        budget.give("b", 30)
        await asyncio.sleep(0)
        assert granted == ["c"]
        budget.give("a", 60)
        await asyncio.gather(*waiting)
        assert (budget.used, budget.waiting_calls) == (30, 0)
        return granted

    assert asyncio.run(scenario()) == ["c", "a"]
