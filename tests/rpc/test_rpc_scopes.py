"""Tokens scoped to table roots and a role, on the three real services: another team's
table and a method above the token's role are PERMISSION_DENIED naming neither the token
nor anything in the table, a token line in the old format keeps every root and role, and
a rewritten token file changes a running server's grants."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf import descriptor

from tidemark.config import ServerConfig
from tidemark.proto.planner.v1 import planner_service_pb2 as pb
from tidemark.rpc.auth import Role
from tidemark.rpc.client import channel_for
from tidemark.rpc.registry import ALL, resolve_services
from tidemark.rpc.server import RunningServer, build_server
from tidemark.services.index import METHODS as INDEX_METHODS
from tidemark.services.marker import METHODS as MARKER_METHODS
from tidemark.services.planner import METHODS as PLANNER_METHODS
from tidemark.table.properties.config import PROPERTIES_PATH

from .test_rpc_security import METHODS, invoke

LEGACY = "legacy-token-0000"
TOKENS = {Role.READ: "team-a-read-0001", Role.WRITE: "team-a-write-0002", Role.ADMIN: "a-admin-3"}
ROLES = {**MARKER_METHODS, **INDEX_METHODS, **PLANNER_METHODS}
DENIED = grpc.StatusCode.PERMISSION_DENIED


def needed(method: descriptor.MethodDescriptor) -> Role:
    """The role a request without a table lock needs (a marker dir delete without the
    lock is an admin's)."""
    if method.name == "DeleteMarkerDir":
        return Role.ADMIN
    return ROLES[method.name].role


class Lake:
    """Team a's and team b's tables under one allowed root, all services on one port."""

    def __init__(self, root: Path) -> None:
        self.root = root
        for team in ("a", "b"):
            (root / team / ".hoodie").mkdir(parents=True)
            (root / team / PROPERTIES_PATH).write_text("hoodie.table.name=t\n")
        self.tokens = root.parent / "tokens"
        self.write_tokens(LEGACY)
        self.server: RunningServer = build_server(
            ServerConfig(
                port=0,
                metrics_port=0,
                auth_token_file=str(self.tokens),
                allowed_roots=(str(root),),
            ),
            resolve_services(ALL),
        )
        self.channel = channel_for(f"127.0.0.1:{self.server.port}")

    def write_tokens(self, *lines: str) -> None:
        scoped = [
            f"{token} name=team-a-{role.label} role={role.label} roots={self.root / 'a'}"
            for role, token in TOKENS.items()
        ]
        self.tokens.write_text("\n".join(["# team a", *scoped, *lines]) + "\n")

    def table(self, team: str) -> str:
        return str(self.root / team)


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lake]:
    running = Lake(tmp_path_factory.mktemp("scopes") / "lake")
    yield running
    running.channel.close()
    running.server.stop(0)


@pytest.mark.parametrize("method", METHODS, ids=lambda method: method.full_name)
def test_a_token_reaches_its_roots_with_its_role_only(
    lake: Lake, method: descriptor.MethodDescriptor
) -> None:
    for role, token in TOKENS.items():
        assert invoke(lake.channel, method, lake.table("b"), token) == DENIED
        on_own = invoke(lake.channel, method, lake.table("a"), token)
        assert (on_own == DENIED) == (needed(method) > role), (role, on_own)
    for team in ("a", "b"):
        assert invoke(lake.channel, method, lake.table(team), LEGACY) not in (
            DENIED,
            grpc.StatusCode.UNAUTHENTICATED,
        )


def test_a_denial_names_neither_the_token_nor_the_table_contents(lake: Lake) -> None:
    (lake.root / "b" / ".hoodie" / "secret-plan.clustering.requested").write_text("x")
    stub = lake.channel.unary_unary("/tidemark.planner.v1.PlannerService/ListPlans", None, None)
    request = pb.ListPlansRequest()
    request.table.base_path = lake.table("b")
    with pytest.raises(grpc.RpcError) as caught:
        stub(
            request.SerializeToString(),
            metadata=(("authorization", f"Bearer {TOKENS[Role.ADMIN]}"),),
        )
    error = caught.value
    assert isinstance(error, grpc.Call)
    details = str(error.details())
    assert error.code() == DENIED
    assert "do not grant read on this table" in details
    for secret in (TOKENS[Role.ADMIN], "team-a", "secret-plan"):
        assert secret not in details


def test_rewriting_the_token_file_changes_a_running_servers_grants(lake: Lake) -> None:
    method = next(method for method in METHODS if method.name == "MarkerDirExists")
    assert invoke(lake.channel, method, lake.table("b"), LEGACY) != DENIED
    lake.write_tokens(f"{LEGACY} name=legacy role=read roots={lake.root / 'a'}")
    try:
        deadline = time.monotonic() + 10
        while invoke(lake.channel, method, lake.table("b"), LEGACY) != DENIED:
            assert time.monotonic() < deadline, "the new grant was never applied"
            time.sleep(0.1)
        assert invoke(lake.channel, method, lake.table("a"), LEGACY) != DENIED
    finally:
        lake.write_tokens(LEGACY)
