"""The rendered containers run as local processes on loopback: each service container's
image entrypoint, args and env (ports made free ones, mounts made folders holding the
Secrets' keys, the allowed root a local one) answers gRPC health on its probe port; the
``helm test`` pod's command passes against them; and a client given only what NOTES.txt
prints (addresses, Spark's env and secrets) makes real calls, with TLS and a token on."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from spark.sparkkit import hudi_rs_table

from tidemark.clients.index import IndexClient
from tidemark.clients.marker import ServiceMarkerReader
from tidemark.clients.planner import PlannerClient
from tidemark.config import ClientConfig
from tidemark.errors import UnauthenticatedError
from tidemark.table import HoodieTable
from tidemark.table.metadata.actions import WRITE_ACTIONS

from .chart import notes_addresses, rendered, submitted_command
from .local_release import LocalRelease, notes_env

INSTANT = "20260101000000000"
SERVING = health_pb2.HealthCheckResponse.SERVING


@pytest.fixture(scope="module", params=["default", "no-tokens", "production", "mutual-tls"])
def local_release(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalRelease]:
    running = LocalRelease(rendered(request.param), tmp_path_factory.mktemp(request.param))
    try:
        running.start()
        yield running
    finally:
        running.stop()


def test_each_container_answers_its_probes_on_the_health_port(local_release: LocalRelease) -> None:
    assert {p.component for p in local_release.processes} == {"marker", "index", "planner"}
    for process in local_release.processes:
        with grpc.insecure_channel(f"127.0.0.1:{process.ports['health']}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                service = process.container[probe]["grpc"]["service"]
                request = health_pb2.HealthCheckRequest(service=service)
                assert stub.Check(request, timeout=30).status == SERVING, (process.pod, probe)
        tls = local_release.values["tls"]["enabled"]
        with grpc.insecure_channel(f"127.0.0.1:{process.ports['grpc']}") as channel:
            check = health_pb2_grpc.HealthStub(channel).Check
            if tls:  # the kubelet's plaintext probe could not use the gRPC port
                with pytest.raises(grpc.RpcError):
                    check(health_pb2.HealthCheckRequest(), timeout=5)
            else:
                assert check(health_pb2.HealthCheckRequest(), timeout=30).status == SERVING


def test_the_helm_test_pod_passes(local_release: LocalRelease) -> None:
    (pod,) = local_release.release.of_kind("Pod")
    (container,) = pod["spec"]["containers"]
    mounts = local_release.mounts(pod["spec"], container)
    env = local_release.env(pod["metadata"]["name"], container, mounts)
    addresses = [local_release.local_address(address) for address in container["args"]]
    assert len(addresses) == 2 + local_release.values["index"]["replicaCount"]
    checked = subprocess.run(
        [sys.executable, *container["command"][1:], *addresses],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert container["command"][0] == "python"
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.splitlines() == [f"{address} SERVING" for address in addresses]


def test_a_client_configured_as_notes_says_makes_real_calls(local_release: LocalRelease) -> None:
    config = ClientConfig.from_env(notes_env(local_release))
    assert config.tls == local_release.values["tls"]["enabled"]
    if local_release.values["auth"]["enabled"]:
        assert config.token == local_release.token
    else:
        assert config.token is None
    addresses = {
        service: local_release.local_address(address)
        for service, address in notes_addresses(local_release.release.notes).items()
    }
    table = local_release.table
    marker = ServiceMarkerReader(addresses["marker"], table, config)
    assert marker.dir_exists(INSTANT) is False
    planner = PlannerClient(addresses["planner"], config)
    assert planner.list_plans(table) == []
    index = IndexClient(addresses["index"], table, config)
    assert index.status().exists is False
    if local_release.values["auth"]["enabled"]:
        anonymous = dataclasses.replace(config, token=None, max_attempts=1)
        with pytest.raises(UnauthenticatedError):
            PlannerClient(addresses["planner"], anonymous).list_plans(table)


@pytest.mark.spark
@pytest.mark.parametrize("local_release", ["production"], indirect=True)
def test_the_spark_submit_example_writes_through_the_release(
    local_release: LocalRelease, tmp_path: Path
) -> None:
    """spark-submit.sh's write job, its arguments and NOTES' env (TLS, the token from the
    Secret), run as ``tidemark write`` on local Spark: markers and the new table's record
    index go through the release's marker and index processes."""
    command = submitted_command()
    job = command[command.index("spark_jobs/write/__main__.py") + 1 :]
    source = tmp_path / "events.parquet"
    pq.write_table(
        pa.table(
            {"event_id": ["e1", "e2", "e3"], "event_date": ["d1", "d1", "d2"], "v": [1, 2, 3]}
        ),
        source,
    )
    table = str(local_release.root / "events")
    local = {"--table": table, "--input": str(source)}
    for flag in ("--marker-service", "--index-service"):
        address = local_release.local_address(job[job.index(flag) + 1])
        local[flag] = address
    args = [local.get(previous, arg) for previous, arg in zip(["", *job[:-1]], job, strict=True)]
    env = {key: value for key, value in os.environ.items() if not key.startswith("TIDEMARK_")}
    written = subprocess.run(
        [str(Path(sys.executable).parent / "tidemark"), "write", *args,
         "--index", "record", "--master", "local[2]"],
        env={**env, **notes_env(local_release)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )  # fmt: skip
    assert written.returncode == 0, written.stderr[-4000:]
    assert local_release.token not in written.stdout + written.stderr
    config = ClientConfig.from_env(notes_env(local_release))
    index = IndexClient(local["--index-service"], table, config)
    written_at = HoodieTable.open(table).timeline.completed(WRITE_ACTIONS)[-1].timestamp
    found = index.lookup(["e1", "e3", "nope"], as_of=written_at)
    assert found.column("partition").to_pylist() == ["d1", "d2", None]
    rows = hudi_rs_table(table)
    assert rows is not None
    assert sorted(rows.column("event_id").to_pylist()) == ["e1", "e2", "e3"]
