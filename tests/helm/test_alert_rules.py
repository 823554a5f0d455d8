"""The chart's alert rules under ``promtool`` (Debian's ``prometheus`` package; install it
with scripts/install_prometheus.sh): they parse, every alert fires on the series its
runbook entry describes and stays quiet on the routine ones (owner redirects, a
released lease), and the chart ships exactly that file and a dashboard Grafana loads."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import yaml

from .chart import ROOT, rendered

ALERTS = ROOT / "helm" / "tidemark" / "files" / "alerts.yaml"
DASHBOARD = ROOT / "helm" / "tidemark" / "files" / "dashboard.json"
RULE_TESTS = Path(__file__).with_name("alerts_test.yaml")
RUNBOOK = ROOT / "docs" / "runbook.md"


def promtool(*args: str) -> str:
    tool = shutil.which("promtool")
    assert tool, "promtool is missing: run scripts/install_prometheus.sh"
    done = subprocess.run(
        [tool, *args], capture_output=True, text=True, timeout=120, cwd=RULE_TESTS.parent
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def alerts() -> list[dict[str, object]]:
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def dashboard_queries() -> list[str]:
    """The dashboard's PromQL: each panel target's expression, and the series selector in
    each variable's ``label_values(selector, label)`` (a Grafana function)."""
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            selector = re.fullmatch(r"label_values\((.+),\s*\w+\)", variable["query"])
            assert selector, variable["query"]
            queries.append(selector.group(1))
    return queries


def test_the_rules_parse_and_pass_their_unit_tests() -> None:
    assert "SUCCESS" in promtool("check", "rules", str(ALERTS))
    assert "SUCCESS" in promtool("test", "rules", RULE_TESTS.name)


def test_every_alert_is_tested_and_has_its_runbook_entry() -> None:
    tested = set(re.findall(r"alertname: (\w+)", RULE_TESTS.read_text()))
    runbook = RUNBOOK.read_text()
    for rule in alerts():
        name = str(rule["alert"])
        assert name in tested, name
        assert f"## {name}" in runbook, name
        annotations = rule["annotations"]
        assert isinstance(annotations, dict)
        assert annotations["runbook"] == f"docs/runbook.md#{name.lower()}"


def test_the_chart_ships_the_rules_and_the_dashboard() -> None:
    release = rendered("alerts-and-dashboard")
    (rule,) = release.of_kind("PrometheusRule")
    assert rule["spec"] == yaml.safe_load(ALERTS.read_text())
    (config_map,) = release.of_kind("ConfigMap")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(config_map["data"]["tidemark.json"])
    assert dashboard == json.loads(DASHBOARD.read_text())
    assert all(dashboard_queries())
