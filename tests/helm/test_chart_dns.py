"""The rendered marker pods (3 and 6 replicas; with ``TIDEMARK_CHART_DNS_AT_MAX`` set also
the production autoscaler's maximum, 8) with DNS as a cluster gives it
(cluster_dns.py: the Service's name -> every pod, each StatefulSet pod's name -> that pod,
a Deployment pod's name -> nothing), and a write through the address NOTES prints whose
creates land on replicas that do not own the marker dir: each such create is redirected
to the owner by the name it advertises, which resolves, and the client calls the owner
from then on: no owner unreachable, every marker listed back exactly
(docs/deploy.md, "Why the marker service is a StatefulSet"). Latencies are printed, not
asserted: a p99 against a one-replica baseline missed its bound at load 20-30, while
the failure this test is for (owners advertised by names that do not resolve) shows
in the client's log on every non-owner create."""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml
from marker.conftest import metric

from tidemark.table.writes.markers import IOType, marker_name

from .chart import CHART, ROOTS, TLS_SECRETS, notes_addresses, render
from .cluster_dns import DOMAIN, ClusterRelease
from .local_release import notes_env

LOAD = Path(__file__).with_name("marker_load.py")
EXECUTORS = 6
"""Client processes, as a write's executors: each learns each dir's owner on its own."""
INSTANTS = [f"2026010100000000{i}" for i in range(4)]
"""Marker dirs written at once (one thread each per executor)."""
MARKERS = 30
"""Creates per executor and dir, one call each, as a write task makes them."""
AT_MAX_ENV = "TIDEMARK_CHART_DNS_AT_MAX"
"""Set (to anything) to run the write also at the production values' autoscaler maximum
(``marker.autoscaling.maxReplicas``): minutes more, so the default suite leaves it out;
its figures are in docs/reliability.md."""


def production_max_replicas() -> int:
    values = yaml.safe_load((CHART / "values-production.yaml").read_text())
    return int(values["marker"]["autoscaling"]["maxReplicas"])


CASES = [(3, False), (6, False), (3, True)]
if os.environ.get(AT_MAX_ENV):
    CASES.append((production_max_replicas(), False))


SECURED = {
    "tls": {"enabled": True, "mutual": True, **TLS_SECRETS},
    "auth": {"enabled": True, "existingSecret": "tokens"},
}
"""Mutual TLS and a token, as production runs: the owner's name is dialled over TLS and
must be one the certificate holds (the chart's ``*.<release>-marker.<ns>...``)."""


def marker_release(replicas: int, secured: bool) -> dict[str, object]:
    values = {
        **ROOTS,
        "auth": {"enabled": False},
        "marker": {"replicaCount": replicas},
        "index": {"enabled": False},
        "planner": {"enabled": False},
    }
    return values | SECURED if secured else values


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One write against one release: create latencies (s, printed) and what happened to
    owners."""

    latencies: list[float]
    redirects: float
    """Owner redirects the replicas answered (their ``tidemark_owner_redirects_total``)."""
    client_events: Counter[str]

    @property
    def p99(self) -> float:
        return statistics.quantiles(self.latencies, n=100)[98]


def run_executors(
    release: ClusterRelease, address: str, env: dict[str, str]
) -> tuple[list[float], Counter[str]]:
    """``EXECUTORS`` marker_load.py processes, started together once all are set up:
    their create latencies and the client's log events."""
    command = [*release.launcher(), sys.executable, str(LOAD), "create", address, release.table]
    executors = [
        subprocess.Popen(
            [*command, ",".join(INSTANTS), str(MARKERS), str(executor)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for executor in range(EXECUTORS)
    ]
    for popen in executors:
        assert popen.stdout is not None
        assert popen.stdout.readline() == "ready\n", popen.communicate(timeout=60)[1][-3000:]
    for popen in executors:
        assert popen.stdin is not None
        popen.stdin.write("go\n")
        popen.stdin.flush()
    latencies: list[float] = []
    client_events: Counter[str] = Counter()
    for popen in executors:
        out, logs = popen.communicate(timeout=300)
        assert popen.returncode == 0, logs[-3000:]
        result = json.loads(out)
        assert result["errors"] == [], logs[-6000:]
        latencies += result["latencies"]
        client_events.update(json.loads(line)["event"] for line in logs.splitlines())
    return latencies, client_events


def run_write(release: ClusterRelease) -> Outcome:
    """Checks the harness resolves as a cluster would, starts the pods, runs the write
    through NOTES' address and reads every marker back; stops the pods."""
    address = notes_addresses(release.release.notes)["marker"]
    service = f"tidemark-marker.{DOMAIN}"
    assert address == f"dns:///{service}:50051"
    pod_names = {f"{pod}.tidemark-marker.{DOMAIN}": ip for pod, ip in release.addresses.items()}
    deployment_pod = f"tidemark-marker-7c9d-x1.tidemark-marker.{DOMAIN}"
    resolved = release.resolve(service, deployment_pod, *pod_names)
    assert resolved[service] == sorted(release.addresses.values())
    assert resolved[deployment_pod] == []  # the name the 0.1 chart advertised
    assert {name: resolved[name] for name in pod_names} == {
        name: [ip] for name, ip in pod_names.items()
    }

    env = {"PATH": os.environ["PATH"], "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    env |= notes_env(release)
    release.start()
    try:
        latencies, client_events = run_executors(release, address, env)
        load = [sys.executable, str(LOAD)]
        instants = ",".join(INSTANTS)
        listed = subprocess.run(
            [*release.launcher(), *load, "list", address, release.table, instants],
            env=env, capture_output=True, text=True, timeout=300, check=True,
        )  # fmt: skip
        expected = sorted(
            marker_name(f"p={e}", f"f{e}-{i}.parquet", IOType.CREATE)
            for e in range(EXECUTORS)
            for i in range(MARKERS)
        )
        assert json.loads(listed.stdout) == dict.fromkeys(INSTANTS, expected)
        redirects = sum(
            metric(p.ports["metrics"], "tidemark_owner_redirects_total", host=p.host)
            for p in release.processes
        )
    finally:
        release.stop()
    assert len(latencies) == EXECUTORS * len(INSTANTS) * MARKERS
    return Outcome(latencies, redirects, client_events)


@pytest.mark.parametrize(
    ("replicas", "secured"),
    CASES,
    ids=[f"{n}-replicas{'-mutual-tls-token' if secured else ''}" for n, secured in CASES],
)
def test_creates_on_non_owners_reach_the_owner_by_its_cluster_name(
    replicas: int, secured: bool, tmp_path: Path
) -> None:
    release = render(marker_release(replicas, secured))
    run = run_write(ClusterRelease(release, tmp_path, 100 + 100 * secured + replicas))
    print(
        f"p99 create: {replicas} replicas {run.p99 * 1000:.1f} ms "
        f"({len(run.latencies)} creates; {run.redirects:.0f} redirected; "
        f"max {max(run.latencies) * 1000:.1f} ms; client log: {dict(run.client_events)})"
    )
    assert run.redirects > 0  # creates did land on non-owners
    # each redirect followed once by the client, and no owner it could not reach
    assert run.client_events["marker dir owner named"] == run.redirects
    assert run.client_events["marker dir owner unreachable"] == 0
