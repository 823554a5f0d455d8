"""A release's rendered service containers run as local processes: each container's image
entrypoint, args and env (mounts made folders holding the Secrets' keys, the allowed root a
local one), each pod at a loopback address. By default every pod is at 127.0.0.1 on free
ports; a subclass may give each pod its own address and the chart's ports, and start it
through a launcher (``cluster_dns.ClusterRelease``: the cluster's DNS names)."""

from __future__ import annotations

import base64
import dataclasses
import itertools
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rpc.certs import Authority, Pair
from table.table_testkit import people_config

from tidemark.table import HoodieTable

from .chart import NAMESPACE, Render, flags, image_entrypoint, notes_spark_conf

TOKEN = "chart-test-token-0001"


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
    host: str
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
        server = authority.issue("server", server=True, dns_names=self.server_names())
        client = authority.issue("client", server=False)

        def pair(leaf: Pair) -> dict[str, str]:
            return {
                "tls.crt": Path(leaf.cert).read_text(),
                "tls.key": Path(leaf.key).read_text(),
                "ca.crt": Path(authority.cert).read_text(),
            }

        auth, tls = self.values["auth"], self.values["tls"]
        made = {
            auth["existingSecret"] or "tokens": {
                auth["tokensKey"]: f"{TOKEN}\n",
                auth["clientTokenKey"]: TOKEN,
            },
        }
        return {
            tls["existingSecret"] or "tidemark-tls": pair(server),
            tls["clientSecret"] or "tidemark-client-tls": pair(client),
            **made,
            **{
                secret["metadata"]["name"]: {
                    key: base64.b64decode(value).decode() for key, value in secret["data"].items()
                }
                for secret in self.release.of_kind("Secret")
            },
        }

    @property
    def token(self) -> str:
        """The token the release gives its clients (the chart's own Secret's, when it
        made one)."""
        auth = self.values["auth"]
        made = [secret["metadata"]["name"] for secret in self.release.of_kind("Secret")]
        name = auth["clientSecret"] or auth["existingSecret"] or made[0]
        return self.secrets[name][auth["clientTokenKey"]]

    def server_names(self) -> tuple[str, ...]:
        """The names the services' certificate holds: the one clients dial here."""
        return ("localhost",)

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

    def pods(self) -> list[tuple[str, dict[str, Any]]]:
        """(pod name, workload) of every pod the release runs: a StatefulSet's by ordinal,
        a Deployment's one pod by a name of the kind its ReplicaSet makes up."""
        pods = []
        for workload in self.release.workloads():
            name = workload["metadata"]["name"]
            if workload["kind"] == "StatefulSet":
                pods += [(f"{name}-{i}", workload) for i in range(self.replicas(workload))]
            else:
                pods.append((f"{name}-7c9d-x1", workload))
        return pods

    def start(self) -> None:
        for pod, workload in self.pods():
            spec = workload["spec"]["template"]["spec"]
            (container,) = spec["containers"]
            self.processes.append(self._start(pod, spec, container))
        for process in self.processes:
            assert process.popen.stdout is not None
            line = process.popen.stdout.readline()
            if line != f"listening on {process.host}:{process.ports['grpc']}\n":
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

    def pod_host(self, pod: str) -> str:
        """The loopback address a pod binds (0.0.0.0 in the pod)."""
        return "127.0.0.1"

    def pod_ports(self, pod: str, container: dict[str, Any]) -> dict[str, int]:
        """The pod's ports by name: free ones here (pods share one address)."""
        workers = int(flags(container["args"]).get("--workers", ["1"])[0])
        names = {port["name"] for port in container["ports"]}
        ports = {name: self.free_ports() for name in ("grpc", "bulk", "health") if name in names}
        ports["metrics"] = self.free_ports(workers)
        return ports | {f"metrics-w{w}": ports["metrics"] + w for w in range(1, workers)}

    def launcher(self) -> list[str]:
        """What a pod's command runs under (nothing: the host as it is)."""
        return []

    def _start(self, pod: str, spec: dict[str, Any], container: dict[str, Any]) -> Process:
        mounts = self.mounts(spec, container)
        env = self.env(pod, container, mounts)
        host = self.pod_host(pod)
        ports = self.pod_ports(pod, container)
        assert set(ports) == {port["name"] for port in container["ports"]}
        flag_ports = {
            "--port": "grpc",
            "--bulk-port": "bulk",
            "--metrics-port": "metrics",
            "--health-port": "health",
        }
        args = []
        for arg in container["args"]:
            name, _, value = arg.partition("=")
            if name in flag_ports:
                value = str(ports[flag_ports[name]])
            elif name == "--host":
                value = host
            elif name == "--allowed-root":
                value = str(self.root)  # the release's s3:// roots, as a local one
            else:
                value = local_paths(expand(value, env), mounts)
            args.append(f"{name}={value}" if name.startswith("--") else arg)
        entrypoint = image_entrypoint()
        executable = str(Path(sys.executable).parent / entrypoint[0])
        command = [*self.launcher(), executable, *entrypoint[1:], *args]
        with self.log_path(pod).open("w") as logs:
            popen = subprocess.Popen(
                command, env=env, cwd=self.directory, stdout=subprocess.PIPE, stderr=logs, text=True
            )
        component = container["name"]
        return Process(pod, host, component, container, ports, popen)

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
