"""The token file fails closed: a rewrite applies its valid lines and refuses the tokens
of the others, a missing file refuses every token until it is back, a rewrite keeping
size and modification time is reloaded (content hashed), the file's state is exported as
metrics, a revoked token is refused within the reload interval on a real server, and
refused calls are logged one line per peer and interval with their count."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from structlog.testing import capture_logs

from tidemark.config import ServerConfig
from tidemark.errors import ConfigError
from tidemark.proto.marker.v1 import marker_service_pb2 as pb
from tidemark.rpc import auth
from tidemark.rpc.auth import TOKEN_RECHECK_S, DeniedCalls, Role, TokenFile
from tidemark.rpc.client import channel_for
from tidemark.rpc.registry import resolve_services
from tidemark.rpc.server import RunningServer, build_server
from tidemark.table.properties.config import PROPERTIES_PATH
from tidemark.testing.clock import AdvancingClock

from .test_rpc_metrics import scrape

TEAM_A = "team-a-token-0001"
TEAM_B = "team-b-token-0002"
INSTANT = "20260101000000000"
REVOCATION_BOUND_S = 5.0
"""Issue 52: a revoked token is refused within 5 s, whatever else the file holds."""
HANG_S = 60.0
"""How long a running server is given to show a change of its token file: far past the
5 s a loaded machine may overrun, only so a test that would never see it fails."""


def rewrite_keeping_size_and_time(path: Path, text: str) -> None:
    """Replace the content, padded to the old size, and put the old mtime back: a
    reload that looked at size and time would miss it."""
    before = path.stat()
    padded = text.ljust(before.st_size - 1, "#") + "\n"
    assert len(padded.encode()) == before.st_size
    path.write_text(padded)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


@pytest.fixture
def tokens(tmp_path: Path) -> Path:
    path = tmp_path / "tokens"
    path.write_text(f"{TEAM_A} name=team-a\n{TEAM_B} name=team-b role=write\n# padding{'#' * 60}\n")
    return path


def test_a_rewrite_applies_its_valid_lines_and_refuses_the_tokens_of_the_others(
    tokens: Path,
) -> None:
    clock = AdvancingClock()
    accepted = TokenFile(str(tokens), clock=clock)
    assert accepted.grant_for(TEAM_B) is not None
    rewrite_keeping_size_and_time(
        tokens, f"{TEAM_A} name=team-a\n{TEAM_B} name=team-b role=superuser\n"
    )
    clock.advance(TOKEN_RECHECK_S)
    assert TOKEN_RECHECK_S <= REVOCATION_BOUND_S
    assert accepted.grant_for(TEAM_B) is None
    grant = accepted.grant_for(TEAM_A)
    assert grant is not None and grant.name == "team-a"
    assert accepted.invalid_lines == 1


def test_a_token_on_a_line_that_does_not_parse_is_refused_even_where_another_grants_it(
    tokens: Path,
) -> None:
    clock = AdvancingClock()
    accepted = TokenFile(str(tokens), clock=clock)
    tokens.write_text(f"{TEAM_A}\n{TEAM_B} role=read\n{TEAM_B} roles=a\n")
    clock.advance(TOKEN_RECHECK_S)
    assert accepted.grant_for(TEAM_B) is None
    assert accepted.grant_for(TEAM_A) is not None


def test_a_missing_or_unreadable_file_refuses_every_token_until_it_is_back(
    tokens: Path,
) -> None:
    clock = AdvancingClock()
    accepted = TokenFile(str(tokens), clock=clock)
    content = tokens.read_text()
    tokens.unlink()
    clock.advance(TOKEN_RECHECK_S)
    assert accepted.grant_for(TEAM_A) is None
    assert accepted.unreadable
    tokens.mkdir()  # unreadable as a file, whoever runs the test (root reads any mode)
    clock.advance(TOKEN_RECHECK_S)
    assert accepted.grant_for(TEAM_A) is None
    tokens.rmdir()
    tokens.write_text(content)
    clock.advance(TOKEN_RECHECK_S)
    grant = accepted.grant_for(TEAM_B)
    assert grant is not None and grant.role is Role.WRITE
    assert not accepted.unreadable


def test_at_start_a_line_that_does_not_parse_is_refused_without_showing_a_token(
    tmp_path: Path,
) -> None:
    path = tmp_path / "tokens"
    path.write_text(f"{TEAM_A} {TEAM_B}\n")
    with pytest.raises(ConfigError, match="line 1") as refused:
        TokenFile(str(path))
    assert TEAM_B not in str(refused.value)
    assert TEAM_A not in str(refused.value)


class Served:
    """The marker service with a token file, on loopback, with a table."""

    def __init__(self, tmp_path: Path) -> None:
        self.table = tmp_path / "t"
        (self.table / ".hoodie").mkdir(parents=True)
        (self.table / PROPERTIES_PATH).write_text("hoodie.table.name=t\n")
        self.tokens = tmp_path / "tokens"
        self.tokens.write_text(f"{TEAM_A} name=team-a\n{TEAM_B} name=team-b\n")
        self.server: RunningServer = build_server(
            ServerConfig(port=0, metrics_port=0, auth_token_file=str(self.tokens)),
            resolve_services("marker"),
        )
        self.channel = channel_for(f"127.0.0.1:{self.server.port}")

    def call(self, token: str | None) -> grpc.StatusCode:
        request = pb.MarkerDirExistsRequest(instant_time=INSTANT)
        request.table.base_path = str(self.table)
        metadata = (("authorization", f"Bearer {token}"),) if token else ()
        stub = self.channel.unary_unary(
            "/tidemark.marker.v1.MarkerService/MarkerDirExists",
            request_serializer=lambda message: message.SerializeToString(),
            response_deserializer=pb.MarkerDirExistsResponse.FromString,
        )
        try:
            stub(request, timeout=30, metadata=metadata)
        except grpc.RpcError as error:
            assert isinstance(error, grpc.Call)
            return error.code()
        return grpc.StatusCode.OK

    def metric(self, name: str) -> float:
        return scrape(self.server.metrics_port)[(name, frozenset())]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    running = Served(tmp_path)
    yield running
    running.channel.close()
    running.server.stop(0)


def test_a_revoked_token_is_refused_on_a_running_server(served: Served) -> None:
    """The server's token file rechecks on its own: the revoked token is refused. The 5 s
    bound is the recheck interval on the token file's clock (the first test above); here a
    loaded machine may take longer, so the wait only guards against a hang."""
    assert served.call(TEAM_B) == grpc.StatusCode.OK
    assert served.metric("tidemark_auth_token_file_invalid_lines") == 0
    rewrite_keeping_size_and_time(served.tokens, f"{TEAM_A} name=team-a\nsomeone role=superuser\n")
    revoked_by = time.monotonic() + HANG_S
    while served.call(TEAM_B) == grpc.StatusCode.OK:
        assert time.monotonic() < revoked_by, "the revoked token was still accepted"
    assert served.call(TEAM_B) == grpc.StatusCode.UNAUTHENTICATED
    assert served.call(TEAM_A) == grpc.StatusCode.OK
    assert served.metric("tidemark_auth_token_file_invalid_lines") == 1


def test_a_deleted_token_file_shows_in_the_metrics_without_a_call(served: Served) -> None:
    assert served.metric("tidemark_auth_token_file_unreadable") == 0
    served.tokens.unlink()
    noticed_by = time.monotonic() + HANG_S
    while served.metric("tidemark_auth_token_file_unreadable") == 0:
        assert time.monotonic() < noticed_by, "the missing token file was never exported"
    assert served.call(TEAM_A) == grpc.StatusCode.UNAUTHENTICATED


def test_a_flood_of_refused_calls_logs_one_line_per_peer_and_interval(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    auth.DENIED_CALLS.flush()
    monkeypatch.setattr(auth.DENIED_CALLS, "interval_s", 3600.0)
    flood = 300
    with capture_logs() as logs:
        for _ in range(flood):
            assert served.call(None) == grpc.StatusCode.UNAUTHENTICATED
        served.server.stop(0)  # ends the interval: its lines are logged now
    denied = [line for line in logs if line["event"] == "call denied"]
    assert len(denied) == 1
    assert denied[0]["calls"] == flood
    assert denied[0]["reasons"] == {"missing or unknown bearer token": flood}
    assert denied[0]["peer"].startswith("ipv4:127.0.0.1:")


def test_denied_calls_are_logged_when_their_interval_ends() -> None:
    denied = DeniedCalls(interval_s=0.05)
    with capture_logs() as logs:
        for _ in range(3):
            denied.add("ipv4:10.0.0.1:1", "missing or unknown bearer token")
        denied.add("ipv4:10.0.0.2:2", "no grant", "team-a")
        logged_by = time.monotonic() + 30
        while len(logs) < 2:
            assert time.monotonic() < logged_by, "the interval's lines never came"
            time.sleep(0.01)
    lines = {line["peer"]: line for line in logs}
    assert lines["ipv4:10.0.0.1:1"]["calls"] == 3
    assert lines["ipv4:10.0.0.2:2"]["clients"] == ["team-a"]
    assert all(line["event"] == "call denied" for line in logs)
