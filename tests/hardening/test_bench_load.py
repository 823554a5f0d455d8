"""``python -m benchmarks load`` for 30 seconds at small counts: the three ``tidemark serve``
processes under load from spawned clients answer every call exactly (no errors, no wrong
answers), answer health checks throughout (never as many failed in a row as take a pod
out of its Service: one check slower than a second on a loaded 2-core machine is not an
outage), and their memory, sampled throughout,
stays under ``LIMIT_MARGIN`` of the memory limit the chart gives each service's pod. The
60-second run of the issue is a row of docs/reliability.md (the suite keeps 30 s)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks.__main__ import main
from benchmarks.load import KINDS, READINESS_FAILURE_THRESHOLD

DURATION_S = 30
LIMIT_MARGIN = 0.8
"""Peak RSS must stay under this fraction of the chart's memory limit."""
VALUES = Path(__file__).resolve().parents[2] / "helm" / "tidemark" / "values.yaml"
COMPONENTS = {"markers": "marker", "lookups": "index", "planner": "planner"}
UNITS_MIB = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "Ti": 1024 * 1024}


def chart_values() -> dict[str, Any]:
    return dict(yaml.safe_load(VALUES.read_text()))


def chart_memory_limit_mib(component: str) -> float:
    """``<component>.resources.limits.memory`` of the chart's values (a Kubernetes quantity
    with a binary suffix), in MiB."""
    limit = str(chart_values()[component]["resources"]["limits"]["memory"])
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti)", limit)
    assert match, f"{component} memory limit {limit!r}: expected a number and Ki/Mi/Gi/Ti"
    return float(match.group(1)) * UNITS_MIB[match.group(2)]


def test_thirty_seconds_of_load_without_errors_or_failed_health_checks_under_chart_limits(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = [
        "load",
        "--duration-s",
        str(DURATION_S),
        "--marker-writers",
        "24",
        "--markers-per-instant",
        "500",
        "--lookup-streams",
        "4",
        "--lookup-keys",
        "10000",
        "--index-entries",
        "100000",
        "--planner-tables",
        "5",
        "--files-per-table",
        "6",
        "--json",
    ]
    assert chart_values()["probes"]["readiness"]["failureThreshold"] == READINESS_FAILURE_THRESHOLD
    code = main(argv)
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    for kind in KINDS:
        load = report[kind]
        assert load["errors"] == 0, load["error_samples"]
        assert load["calls"] > 0 and load["items_per_s"] > 0
        assert 0 < load["p50_ms"] <= load["p99_ms"]
        samples = load["rss_mib"]
        assert len(samples) >= DURATION_S // 2  # sampled every second, throughout
        assert samples[-1][0] >= DURATION_S - 2
        assert all(mib > 0 for _, mib in samples)
        assert load["rss_max_mib"] == max(mib for _, mib in samples)
        assert load["rss_max_mib"] < LIMIT_MARGIN * chart_memory_limit_mib(COMPONENTS[kind])
        streak = load["health_failure_streak"]
        assert streak < READINESS_FAILURE_THRESHOLD, load["health_failure_samples"]
        assert streak <= load["health_failures"]
        assert load["health_checks"] >= DURATION_S // 2  # checked every second, throughout
        assert isinstance(load["rss_flat"], bool)
    assert code == 0
    assert report["lookups"]["items"] == report["lookups"]["calls"] * 10_000
    assert report["markers"]["checked"] > 0  # marker dirs listed back whole
    assert report["planner"]["checked"] > 0  # the triggers planned too
