"""Planner services on real gRPC servers (loopback, ephemeral ports) and test tables."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from table.log_testkit import extract_mor_fixtures

from planner.plankit import new_table
from tidemark.clients.planner import PlannerClient
from tidemark.config import ClientConfig, ServerConfig
from tidemark.rpc.server import RunningServer, build_server
from tidemark.services.planner import planner_service
from tidemark.services.planner.config import PlannerConfig
from tidemark.table import HoodieTable

FAST_CLIENT = ClientConfig(
    timeout_s=30.0, max_attempts=3, max_total_s=60.0, initial_backoff_s=0.05, max_backoff_s=0.2
)
TEST_CONFIG = PlannerConfig(lock_wait_s=10.0, trigger_poll_s=0.2)

StartPlanner = Callable[..., PlannerClient]


@pytest.fixture
def start_planner() -> Iterator[StartPlanner]:
    """``start_planner(config)``: a planner service on loopback and a client of it."""
    servers: list[RunningServer] = []

    def start(config: PlannerConfig = TEST_CONFIG) -> PlannerClient:
        server = build_server(ServerConfig(port=0, metrics_port=0), [planner_service(config)])
        servers.append(server)
        return PlannerClient(f"127.0.0.1:{server.port}", FAST_CLIENT)

    yield start
    for server in reversed(servers):
        server.stop(0)


@pytest.fixture
def planner(start_planner: StartPlanner) -> PlannerClient:
    return start_planner()


SMALL_FILES = {"eu": [50, 400, 30, 200], "us": [10, 20], "asia": [500]}
"""Three partitions of small files of different sizes (rows per file)."""


@pytest.fixture
def small_files(tmp_path: Path) -> HoodieTable:
    return new_table(tmp_path, SMALL_FILES)


@pytest.fixture(scope="session")
def mor_tables(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The merge-on-read tables Hudi wrote, extracted once; tests copy before changing one."""
    return extract_mor_fixtures(tmp_path_factory.mktemp("hudi-mor"))
