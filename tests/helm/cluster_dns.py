"""A release's pods with name resolution as a Kubernetes cluster gives it, without a
cluster: each pod its own loopback address (the whole 127/8 is loopback on Linux) bound
on the chart's own ports, and every pod (and every client of the test) run in a private
mount namespace whose ``/etc/hosts`` is a file written here:

- ``<pod>.<headless service>.<ns>.svc.cluster.local`` -> that pod, for a StatefulSet's pods
  (their ``subdomain``), the records Kubernetes publishes for pods with a hostname;
- ``<service>.<ns>.svc.cluster.local`` -> every pod it selects (one line each: glibc's
  getaddrinfo returns them all), as a headless Service resolves;
- nothing for a Deployment's pod names, which no cluster DNS answers.

The host's own ``/etc/hosts`` is untouched (the bind mount lives in the namespace)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .chart import NAMESPACE, Render, labels_match
from .local_release import LocalRelease

DOMAIN = f"{NAMESPACE}.svc.cluster.local"


def launcher(hosts: Path) -> list[str]:
    """A command prefix that runs the command with ``hosts`` as its ``/etc/hosts``, and
    gRPC resolving names by getaddrinfo (glibc), which reads a hosts file as a DNS server
    answers. gRPC's default resolver, c-ares, merges the lines of a hosts file that share
    an address: with the Service's name on every pod's line, every pod's own name resolves
    to the first pod (a cluster's DNS server answers each name apart)."""
    return [
        "unshare", "--mount", "--propagation", "private",
        "sh", "-c", 'mount --bind "$0" /etc/hosts && exec "$@"', str(hosts),
        "env", "GRPC_DNS_RESOLVER=native",
    ]  # fmt: skip


RESOLVE = """
import json, socket, sys
found = {}
for name in sys.argv[1:]:
    try:
        infos = socket.getaddrinfo(name, None, socket.AF_INET, socket.SOCK_STREAM)
    except socket.gaierror:
        infos = []
    found[name] = sorted({info[4][0] for info in infos})
print(json.dumps(found))
"""


class ClusterRelease(LocalRelease):
    """The release's pods at ``127.<subnet>.0.<1 + i>``, names resolved as in a cluster."""

    def __init__(self, release: Render, directory: Path, subnet: int) -> None:
        super().__init__(release, directory)
        self.addresses = {pod: f"127.{subnet}.0.{i + 1}" for i, (pod, _) in enumerate(self.pods())}
        self.hosts = directory / "hosts"
        self.hosts.write_text(Path("/etc/hosts").read_text() + self.records())

    def records(self) -> str:
        """The hosts-file lines of the cluster's DNS records for the release's pods."""
        lines = []
        for service in self.release.of_kind("Service"):
            selector = service["spec"]["selector"]
            for pod, workload in self.pods():
                if labels_match(selector, workload["spec"]["template"]["metadata"]["labels"]):
                    lines.append(f"{self.addresses[pod]} {service['metadata']['name']}.{DOMAIN}")
        for pod, workload in self.pods():
            if workload["kind"] == "StatefulSet":
                subdomain = workload["spec"]["template"]["spec"]["subdomain"]
                lines.append(f"{self.addresses[pod]} {pod}.{subdomain}.{DOMAIN}")
        return "".join(f"{line}\n" for line in lines)

    def server_names(self) -> tuple[str, ...]:
        """What the chart's Certificate names: each Service and its pods' names."""
        services = [service["metadata"]["name"] for service in self.release.of_kind("Service")]
        return tuple(name for s in services for name in (f"{s}.{DOMAIN}", f"*.{s}.{DOMAIN}"))

    def pod_host(self, pod: str) -> str:
        return self.addresses[pod]

    def pod_ports(self, pod: str, container: dict[str, Any]) -> dict[str, int]:
        """The container's own ports: each pod has an address of its own, as in a cluster."""
        ports = {port["name"]: int(port["containerPort"]) for port in container["ports"]}
        for port in ports.values():
            with socket.socket() as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do
                try:
                    probe.bind((self.addresses[pod], port))
                except OSError as error:
                    pytest.fail(f"{pod}: cannot bind {self.addresses[pod]}:{port}: {error}")
        return ports

    def launcher(self) -> list[str]:
        return launcher(self.hosts)

    def resolve(self, *names: str) -> dict[str, list[str]]:
        """The IPv4 addresses each name resolves to inside the harness (getaddrinfo)."""
        if shutil.which("unshare") is None:
            pytest.fail("the cluster DNS harness needs unshare(1) (util-linux)")
        resolved = subprocess.run(
            [*self.launcher(), sys.executable, "-c", RESOLVE, *names],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if resolved.returncode != 0:
            pytest.fail(
                "the cluster DNS harness needs a private mount namespace (root or "
                f"CAP_SYS_ADMIN: `unshare --mount`) to bind its hosts file: {resolved.stderr}"
            )
        found: dict[str, list[str]] = json.loads(resolved.stdout)
        return found
