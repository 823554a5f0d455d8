"""A real Prometheus (Debian's package, scripts/install_prometheus.sh) loaded with the chart's
rules, scraping the marker, index and planner services (TLS on, as production values have
it) and the Spark jobs' textfile through node_exporter's textfile collector, as a cluster's
ServiceMonitor and node exporters would (the same ``namespace``/``pod``/``container``
labels). After a few calls on each service, one refused: every target is up, every rule
evaluates without error, every alert's expression is a valid query, and every series
selector in it (those of the recording rules it uses included) matches real series from
our processes. So does every query of the Grafana dashboard, which also returns series (a
ratio whose two sides' labels differ returns none). The test certificates expire in a
day, so the certificate alert's expression must select the three servers."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc
from replicas.index_replicakit import free_ports
from rpc.certs import Authority
from table.log_testkit import extract_mor_fixture

from benchmarks.load import marker_tables, small_files_table
from benchmarks.markers import proto_marker
from tidemark.clients.planner import PlannerClient, plan_options
from tidemark.config import ClientConfig, ServerConfig
from tidemark.errors import TidemarkError, UnauthenticatedError
from tidemark.jobs.job_metrics import TEXTFILE_ENV, report
from tidemark.proto.common.v1.common_pb2 import TableRef
from tidemark.proto.index.v1 import index_service_pb2 as index_pb
from tidemark.proto.index.v1.index_service_pb2_grpc import IndexServiceStub
from tidemark.proto.marker.v1 import marker_service_pb2 as marker_pb
from tidemark.proto.marker.v1.marker_service_pb2_grpc import MarkerServiceStub
from tidemark.rpc.client import channel_for
from tidemark.rpc.registry import resolve_services
from tidemark.rpc.server import RunningServer, build_server
from tidemark.table.timeline.instant import new_instant_time

from .test_alert_rules import ALERTS, dashboard_queries

SERVICES = ("marker", "index", "planner")
TOKEN = "scrape-test-token-0001"
BEARER = (("authorization", f"Bearer {TOKEN}"),)
"""For the calls made through bare stubs (the clients send it themselves)."""
NAMESPACE = "lake"
START_TIMEOUT_S = 60.0
PROMQL_WORDS = frozenset({"and", "or", "unless", "bool", "offset", "group_left", "group_right"})
GROUPINGS = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
SELECTOR = re.compile(r"(?<![\w.:])([A-Za-z_:][\w:]*)\s*(\{[^}]*\})?")
"""A name (not inside a number or another name), and its matchers if any."""


def binary(name: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} is missing: run scripts/install_prometheus.sh"
    return path


def selectors(expr: str) -> list[str]:
    """The series selectors of a PromQL expression (``name{matchers}``): identifiers that
    are not functions, aggregations, keywords or grouping labels."""
    text = GROUPINGS.sub(" ", re.sub(r"\[[^\]]*\]", " ", expr))
    found = []
    for match in SELECTOR.finditer(text):
        rest = text[match.end() :].lstrip()
        name = match.group(1)
        if name in PROMQL_WORDS or rest.startswith("("):
            continue
        found.append(name + (match.group(2) or ""))
    return found


def rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def source_selectors(expr: str, recorded: dict[str, str]) -> list[str]:
    """``expr``'s selectors, those naming a recording rule replaced by the rule's own."""
    found = []
    for selector in selectors(expr):
        name = selector.split("{")[0]
        found += source_selectors(recorded[name], recorded) if name in recorded else [selector]
    return found


class Prometheus:
    """``prometheus`` on a free loopback port with its storage in ``directory``."""

    def __init__(self, directory: Path, config: dict[str, Any]) -> None:
        (port,) = free_ports(1)
        self.url = f"http://127.0.0.1:{port}"
        config_file = directory / "prometheus.yml"
        config_file.write_text(yaml.safe_dump(config))
        self.process = subprocess.Popen(
            [
                binary("prometheus"),
                f"--config.file={config_file}",
                f"--storage.tsdb.path={directory / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=(directory / "prometheus.log").open("w"),
        )

    def get(self, path: str, **params: str) -> Any:
        url = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as answer:
            return json.load(answer)

    def query(self, expr: str) -> list[dict[str, Any]]:
        answer = self.get("/api/v1/query", query=expr)
        assert answer["status"] == "success", (expr, answer)
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result

    def wait_until(self, what: str, ready: Any) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        last: Any = None
        while time.monotonic() < deadline:
            assert self.process.poll() is None, "prometheus exited"
            try:
                last = ready()
            except OSError as error:  # not listening yet
                last = error
            if last is True:
                return
            time.sleep(0.5)
        pytest.fail(f"{what} not within {START_TIMEOUT_S:.0f} s: {last}")

    def close(self) -> None:
        self.process.terminate()
        assert self.process.wait(timeout=30) == 0


def node_exporter(textfiles: Path, port: int) -> subprocess.Popen[bytes]:
    """node_exporter with only its textfile collector, reading ``textfiles``/*.prom."""
    return subprocess.Popen(
        [
            binary("prometheus-node-exporter"),
            "--collector.disable-defaults",
            "--collector.textfile",
            f"--collector.textfile.directory={textfiles}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[dict[str, RunningServer], ClientConfig]]:
    """The three services, each its own server with TLS, a token file and its own
    /metrics."""
    authority = Authority(tmp_path)
    pair = authority.issue("server", server=True)
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN}\n")
    started: dict[str, RunningServer] = {}
    try:
        for service in SERVICES:
            config = ServerConfig(
                port=0,
                metrics_port=0,
                tls_cert_path=pair.cert,
                tls_key_path=pair.key,
                auth_token_file=str(tokens),
            )
            started[service] = build_server(config, resolve_services(service))
        yield started, ClientConfig(tls_ca_path=authority.cert, token=TOKEN, max_attempts=1)
    finally:
        for server in started.values():
            server.stop(0)


def traffic(servers: dict[str, RunningServer], client: ClientConfig, root: Path) -> None:
    """A few calls on each service, each service refusing one (a marker on a path that is
    no table, the stats of an index never built, a plan that does not exist) and one
    without a token; the planner lists a merge-on-read table's compactions (its backlog
    series)."""
    (marker_table,) = marker_tables(root, 1)
    planned = small_files_table(str(root / "planned"), 4)
    addresses = {name: f"127.0.0.1:{server.port}" for name, server in servers.items()}
    for address in addresses.values():
        with channel_for(address, config=client) as channel:
            answer = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
            assert answer.status == health_pb2.HealthCheckResponse.SERVING
    with channel_for(addresses["marker"], config=client) as channel:
        markers = MarkerServiceStub(channel)
        instant = new_instant_time()
        request = marker_pb.CreateMarkerRequest(
            table=TableRef(base_path=marker_table),
            instant_time=instant,
            marker=proto_marker(0, instant),
        )
        markers.CreateMarker(request, timeout=30, metadata=BEARER)
        request.table.base_path = str(root / "no-table")
        with pytest.raises(grpc.RpcError):
            markers.CreateMarker(request, timeout=30, metadata=BEARER)
    with channel_for(addresses["index"], config=client) as channel, pytest.raises(grpc.RpcError):
        IndexServiceStub(channel).Stats(
            index_pb.StatsRequest(table=TableRef(base_path=planned)), timeout=30, metadata=BEARER
        )
    planner = PlannerClient(addresses["planner"], client)
    assert planner.schedule(planned, plan_options()).plan.instant_time
    assert planner.list_plans(planned)
    merge_on_read = extract_mor_fixture(root, "v6_nonpartitioned")
    assert planner.list_compactions(merge_on_read) == []  # read: its compaction backlog
    with pytest.raises(TidemarkError):
        planner.get_plan(planned, "20000101000000000")
    anonymous = dataclasses.replace(client, token=None)
    with pytest.raises(UnauthenticatedError):
        PlannerClient(addresses["planner"], anonymous).list_plans(planned)
    with channel_for(addresses["marker"], config=client) as channel:
        with pytest.raises(grpc.RpcError) as refused:
            MarkerServiceStub(channel).CreateMarker(request, timeout=30)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    with channel_for(addresses["index"], config=client) as channel:
        with pytest.raises(grpc.RpcError) as refused:
            IndexServiceStub(channel).Stats(index_pb.StatsRequest(), timeout=30)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED


def scrape_config(servers: dict[str, RunningServer], exporter_port: int) -> dict[str, Any]:
    services = [
        {
            "targets": [f"127.0.0.1:{server.metrics_port}"],
            "labels": {"namespace": NAMESPACE, "pod": f"tidemark-{name}-0", "container": name},
        }
        for name, server in servers.items()
    ]
    return {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(ALERTS)],
        "scrape_configs": [
            {"job_name": "tidemark", "static_configs": services},
            {
                "job_name": "node",
                "static_configs": [
                    {"targets": [f"127.0.0.1:{exporter_port}"], "labels": {"namespace": NAMESPACE}}
                ],
            },
        ],
    }


def test_every_alert_evaluates_against_series_our_processes_export(
    servers: tuple[dict[str, RunningServer], ClientConfig],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    running, client = servers
    traffic(running, client, tmp_path)
    textfiles = tmp_path / "textfiles"
    textfiles.mkdir()
    for command in ("write", "cluster_run"):
        monkeypatch.setenv(TEXTFILE_ENV, str(textfiles / f"tidemark-{command}.prom"))
        report(
            command, str(tmp_path / "planned"), ok=True, seconds=1.5, rows=5, files=1,
            stage_seconds={"prepare": 0.5, "commit": 1.0},
        )  # fmt: skip
    (exporter_port,) = free_ports(1)
    exporter = node_exporter(textfiles, exporter_port)
    prometheus = Prometheus(tmp_path, scrape_config(running, exporter_port))
    try:

        def targets_up() -> bool | list[Any]:
            active = prometheus.get("/api/v1/targets")["data"]["activeTargets"]
            states = [(t["scrapeUrl"], t["health"], t["lastError"]) for t in active]
            return (
                len(states) == len(SERVICES) + 1 and all(s[1] == "up" for s in states)
            ) or states

        def rules_evaluated() -> bool | list[Any]:
            groups = prometheus.get("/api/v1/rules")["data"]["groups"]
            states = [
                (r["name"], r["health"], r.get("lastError")) for g in groups for r in g["rules"]
            ]
            done = len(states) == len(rules()) and all(s[1] == "ok" for s in states)
            return done or states

        prometheus.wait_until("every target up", targets_up)
        prometheus.wait_until("every rule evaluated", rules_evaluated)
        recorded = {rule["record"]: rule["expr"] for rule in rules() if "record" in rule}
        dashboard = [query.replace("$namespace", NAMESPACE) for query in dashboard_queries()]

        def scraped_twice() -> bool | list[str]:
            """The recording rules and dashboard queries still without a series: a rate
            or an increase needs two samples of its counter (two scrapes apart, later
            on a loaded machine)."""
            empty = [expr for expr in [*recorded, *dashboard] if not prometheus.query(expr)]
            return empty if empty else True

        prometheus.wait_until("two scrapes of every service (rates need them)", scraped_twice)

        def unmatched(expr: str) -> list[str]:
            """``expr``'s selectors (through recording rules) that select no series."""
            return [
                selector
                for selector in source_selectors(expr, recorded)
                if not prometheus.query(f"count({selector})")
            ]

        missing = []
        for rule in rules():
            prometheus.query(rule["expr"])
            missing += [(rule.get("alert") or rule["record"], s) for s in unmatched(rule["expr"])]
        for expr in dashboard:
            missing += [(expr, selector) for selector in unmatched(expr)]
            missing += [] if prometheus.query(expr) else [(expr, "no series")]
        assert not missing, missing
        refused = prometheus.query(
            'count by (container) (grpc_server_handled_total{grpc_code!="OK"})'
        )
        assert {series["metric"]["container"] for series in refused} == set(SERVICES)
        (expiry,) = (
            rule["expr"] for rule in rules() if rule.get("alert") == "TidemarkCertificateExpiry"
        )
        assert {series["metric"]["container"] for series in prometheus.query(expiry)} == set(
            SERVICES
        )
    finally:
        prometheus.close()
        exporter.terminate()
        exporter.wait(timeout=30)
