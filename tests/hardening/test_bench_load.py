"""``python -m benchmarks load`` for 30 seconds at small counts: the three ``tidemark serve``
processes under load from spawned clients answer every call exactly (no errors, no wrong
answers), answer every health check throughout, and their memory, sampled throughout,
stays under ``LIMIT_MARGIN`` of the memory limit the chart gives each service's pod. The
60-second run of the issue is a row of docs/reliability.md (the suite keeps 30 s)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from benchmarks.__main__ import main
from benchmarks.load import KINDS

DURATION_S = 30
LIMIT_MARGIN = 0.8
"""Peak RSS must stay under this fraction of the chart's memory limit."""
VALUES = Path(__file__).resolve().parents[2] / "helm" / "tidemark" / "values.yaml"
COMPONENTS = {"markers": "marker", "lookups": "index", "planner": "planner"}
UNITS_MIB = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "Ti": 1024 * 1024}


def chart_memory_limit_mib(component: str) -> float:
    """``<component>.resources.limits.memory`` of the chart's values (a Kubernetes quantity
    with a binary suffix), in MiB."""
    limit = str(yaml.safe_load(VALUES.read_text())[component]["resources"]["limits"]["memory"])
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
        assert load["health_failures"] == 0, load["health_failure_samples"]
        assert load["health_checks"] >= DURATION_S // 2  # checked every second, throughout
        assert isinstance(load["rss_flat"], bool)
    assert code == 0
    assert report["lookups"]["items"] == report["lookups"]["calls"] * 10_000
    assert report["markers"]["checked"] > 0  # marker dirs listed back whole
    assert report["planner"]["checked"] > 0  # the triggers planned too
