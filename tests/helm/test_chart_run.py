"""The rendered containers run as local processes on loopback: each service container's
image entrypoint, args and env (ports made free ones, mounts made folders holding the
Secrets' keys, the allowed root a local one) answers gRPC health on its probe port; the
``helm test`` pod's command passes against them; and a client given only what NOTES.txt
prints (addresses, Spark's env and secrets) makes real calls, with TLS and a token on."""

from __future__ import annotations

import dataclasses
import itertools
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from rpc.certs import Authority, Pair
from spark.sparkkit import hudi_rs_table
from table.table_testkit import people_config

from tidemark.clients.index import IndexClient
from tidemark.clients.marker import ServiceMarkerReader
from tidemark.clients.planner import PlannerClient
from tidemark.config import ClientConfig
from tidemark.errors import UnauthenticatedError
from tidemark.table.table import HoodieTable
from tidemark.table.timeline import WRITE_ACTIONS

from .chart import (
    NAMESPACE,
    Render,
    flags,
    image_entrypoint,
    notes_addresses,
    notes_spark_conf,
    rendered,
    submitted_command,
)

TOKEN = "chart-test-token-0001"
INSTANT = "20260101000000000"
SERVING = health_pb2.HealthCheckResponse.SERVING


def bound_port(port: int = 0) -> int | None:
    """``port`` (0: any) if it can be bound on loopback now, else None."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return None
        return int(probe.getsockname()[1])


@dataclasses.dataclass
class Process:
    """One container run locally: the pod it stands for and its loopback ports."""

    pod: str
    component: str
    container: dict[str, Any]
    ports: dict[str, int]
    popen: subprocess.Popen[str]


class LocalRelease:
    """A release's service containers as processes, with the Secrets it names made here."""

    def __init__(self, release: Render, directory: Path) -> None:
        self.release = release
        self.directory = directory
        self.values = release.merged_values()
        self.root = directory / "lake"
        self.table = HoodieTable.create(str(self.root / "people"), people_config()).uri
        self.secrets = self._secrets()
        self.processes: list[Process] = []
        self._taken: set[int] = set()
        self._folders = itertools.count()

    def _secrets(self) -> dict[str, dict[str, str]]:
        """The Secrets the release expects to exist (cert-manager's included), by name."""
        authority = Authority(self.directory)
        server = authority.issue("server", server=True)
        client = authority.issue("client", server=False)

        def pair(leaf: Pair) -> dict[str, str]:
            return {
                "tls.crt": Path(leaf.cert).read_text(),
                "tls.key": Path(leaf.key).read_text(),
                "ca.crt": Path(authority.cert).read_text(),
            }

        auth, tls = self.values["auth"], self.values["tls"]
        return {
            tls["existingSecret"] or "tidemark-tls": pair(server),
            tls["clientSecret"] or "tidemark-client-tls": pair(client),
            auth["existingSecret"] or "tokens": {
                auth["tokensKey"]: f"{TOKEN}\n",
                auth["clientTokenKey"]: TOKEN,
            },
        }

    def free_ports(self, count: int = 1) -> int:
        """The first of ``count`` consecutive loopback ports, free now and given to no
        other process of this release (an index worker i binds its metrics port + i)."""
        while True:
            first = bound_port()
            assert first is not None
            block = set(range(first, first + count))
            if not block & self._taken and all(bound_port(port) for port in block - {first}):
                self._taken |= block
                return first

    def new_folder(self) -> Path:
        folder = self.directory / "mounts" / str(next(self._folders))
        folder.mkdir(parents=True)
        return folder

    def secret_folder(self, name: str, items: list[dict[str, str]] | None = None) -> Path:
        """A Secret mounted as a folder (its ``items`` only, when given)."""
        folder = self.new_folder()
        data = self.secrets[name]
        chosen = items or [{"key": key, "path": key} for key in data]
        for item in chosen:
            (folder / item["path"]).write_text(data[item["key"]])
        return folder

    def mounts(self, spec: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
        """Each mount path of ``container`` -> a local folder holding what the pod would."""
        volumes = {volume["name"]: volume for volume in spec.get("volumes", [])}
        local = {}
        for mount in container.get("volumeMounts", []):
            volume = volumes[mount["name"]]
            if "secret" in volume:
                folder = self.secret_folder(
                    volume["secret"]["secretName"], volume["secret"].get("items")
                )
            else:
                assert "emptyDir" in volume
                folder = self.new_folder()
            local[mount["mountPath"]] = str(folder)
        return local

    def env(self, pod: str, container: dict[str, Any], mounts: dict[str, str]) -> dict[str, str]:
        """The container's env as the kubelet would give it (fieldRefs, secretKeyRefs)."""
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
        for item in container.get("env", []):
            if "value" in item:
                env[item["name"]] = local_paths(item["value"], mounts)
            elif "fieldRef" in item["valueFrom"]:
                assert item["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
                env[item["name"]] = pod
            else:
                ref = item["valueFrom"]["secretKeyRef"]
                env[item["name"]] = self.secrets[ref["name"]][ref["key"]]
        return env

    def start(self) -> None:
        for workload in self.release.workloads():
            spec = workload["spec"]["template"]["spec"]
            (container,) = spec["containers"]
            name = workload["metadata"]["name"]
            replicas = self.replicas(workload) if workload["kind"] == "StatefulSet" else 1
            for ordinal in range(replicas):
                pod = (
                    f"{name}-{ordinal}" if workload["kind"] == "StatefulSet" else f"{name}-7c9d-x1"
                )
                self.processes.append(self._start(pod, spec, container))
        for process in self.processes:
            assert process.popen.stdout is not None
            line = process.popen.stdout.readline()
            if line != f"listening on 127.0.0.1:{process.ports['grpc']}\n":
                process.popen.kill()
                process.popen.communicate()
                logs = self.log_path(process.pod).read_text()
                pytest.fail(f"{process.pod} did not start: {line!r}\n{logs[-3000:]}")

    def replicas(self, workload: dict[str, Any]) -> int:
        """The workload's replicas, or under an autoscaler its minimum."""
        name = workload["metadata"]["name"]
        for autoscaler in self.release.of_kind("HorizontalPodAutoscaler"):
            if autoscaler["spec"]["scaleTargetRef"]["name"] == name:
                return int(autoscaler["spec"]["minReplicas"])
        return int(workload["spec"]["replicas"])

    def log_path(self, pod: str) -> Path:
        """Where a process's logs go (a file: a pipe nobody reads would fill and block it)."""
        return self.directory / f"{pod}.log"

    def _start(self, pod: str, spec: dict[str, Any], container: dict[str, Any]) -> Process:
        mounts = self.mounts(spec, container)
        env = self.env(pod, container, mounts)
        workers = int(flags(container["args"]).get("--workers", ["1"])[0])
        ports = {"grpc": self.free_ports(), "health": self.free_ports()}
        ports["metrics"] = self.free_ports(workers)
        ports |= {f"metrics-w{worker}": ports["metrics"] + worker for worker in range(1, workers)}
        assert set(ports) == {port["name"] for port in container["ports"]}
        flag_ports = {"--port": "grpc", "--metrics-port": "metrics", "--health-port": "health"}
        args = []
        for arg in container["args"]:
            name, _, value = arg.partition("=")
            if name in flag_ports:
                value = str(ports[flag_ports[name]])
            elif name == "--host":
                value = "127.0.0.1"  # loopback here; 0.0.0.0 in the pod
            elif name == "--allowed-root":
                value = str(self.root)  # the release's s3:// roots, as a local one
            else:
                value = local_paths(expand(value, env), mounts)
            args.append(f"{name}={value}" if name.startswith("--") else arg)
        entrypoint = image_entrypoint()
        command = [str(Path(sys.executable).parent / entrypoint[0]), *entrypoint[1:], *args]
        with self.log_path(pod).open("w") as logs:
            popen = subprocess.Popen(
                command, env=env, cwd=self.directory, stdout=subprocess.PIPE, stderr=logs, text=True
            )
        component = container["name"]
        return Process(pod, component, container, ports, popen)

    def stop(self) -> None:
        for process in self.processes:
            if process.popen.poll() is None:
                process.popen.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.popen.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                process.popen.kill()
                process.popen.communicate()

    def local_address(self, address: str) -> str:
        """A NOTES address with each in-cluster host replaced by the local replica's port;
        the host becomes ``localhost``, a name the test certificate holds."""
        local = []
        for part in address.split(","):
            scheme = "dns:///" if part.startswith("dns:///") else ""
            host = part.removeprefix(scheme).rpartition(":")[0]
            local.append(f"{scheme}localhost:{self.process_for(host).ports['grpc']}")
        return ",".join(local)

    def process_for(self, host: str) -> Process:
        """The replica a cluster host name reaches: a pod's own name, or its Service's
        (there, the Deployment's pod or the StatefulSet's first)."""
        suffix = f".{NAMESPACE}.svc.cluster.local"
        assert host.endswith(suffix), host
        labels = host.removesuffix(suffix).split(".")
        pod = labels[0] if len(labels) == 2 else None
        service = labels[-1]
        (process,) = [
            p
            for p in self.processes
            if (p.pod == pod if pod else p.pod in (f"{service}-0", f"{service}-7c9d-x1"))
        ]
        return process


def expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion in args from the container's env."""
    return re.sub(r"\$\((\w+)\)", lambda match: env[match.group(1)], value)


def local_paths(value: str, mounts: dict[str, str]) -> str:
    """A path under a mount path made the same path under its local folder."""
    for mount_path, folder in mounts.items():
        if value == mount_path or value.startswith(f"{mount_path}/"):
            return folder + value.removeprefix(mount_path)
    return value


@pytest.fixture(scope="module", params=["default", "production", "mutual-tls"])
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


def notes_env(local_release: LocalRelease) -> dict[str, str]:
    """The env a Spark pod gets from the ``--conf`` lines NOTES prints (its Secrets
    mounted here), as far as Tidemark's clients read it."""
    env: dict[str, str] = {}
    mounts: dict[str, str] = {}
    conf = notes_spark_conf(local_release.release.notes)
    for key, value in conf.items():
        secret = re.fullmatch(r"spark\.kubernetes\.driver\.secrets\.(.+)", key)
        if secret:
            mounts[value] = str(local_release.secret_folder(secret.group(1)))
    for key, value in conf.items():
        env_name = re.fullmatch(r"spark\.kubernetes\.driverEnv\.(\w+)", key)
        if env_name:
            env[env_name.group(1)] = local_paths(value, mounts)
        secret_env = re.fullmatch(r"spark\.kubernetes\.driver\.secretKeyRef\.(\w+)", key)
        if secret_env:
            name, _, secret_key = value.partition(":")
            env[secret_env.group(1)] = local_release.secrets[name][secret_key]
    return env


def test_a_client_configured_as_notes_says_makes_real_calls(local_release: LocalRelease) -> None:
    config = ClientConfig.from_env(notes_env(local_release))
    assert config.tls == local_release.values["tls"]["enabled"]
    assert (config.token == TOKEN) == local_release.values["auth"]["enabled"]
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
    job = command[command.index("spark_jobs/write.py") + 1 :]
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
    assert TOKEN not in written.stdout + written.stderr
    config = ClientConfig.from_env(notes_env(local_release))
    index = IndexClient(local["--index-service"], table, config)
    written_at = HoodieTable.open(table).timeline.completed(WRITE_ACTIONS)[-1].timestamp
    found = index.lookup(["e1", "e3", "nope"], as_of=written_at)
    assert found.column("partition").to_pylist() == ["d1", "d2", None]
    rows = hudi_rs_table(table)
    assert rows is not None
    assert sorted(rows.column("event_id").to_pylist()) == ["e1", "e2", "e3"]
