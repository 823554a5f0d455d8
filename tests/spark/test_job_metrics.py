"""A Spark job's run as Prometheus metrics in a textfile (node_exporter's collector): a
write reports its stage times, lock wait, rows and files and success; a failed one its
failure."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from pyspark.sql import SparkSession

from tidemark.jobs.job_metrics import TEXTFILE_ENV

from .clikit import Cli


def samples(path: Path) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(path.read_text())
        for sample in family.samples
    }


def test_a_write_and_a_failed_write_report_their_runs(
    spark: SparkSession,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    textfile = tmp_path / "tidemark.prom"
    monkeypatch.setenv(TEXTFILE_ENV, str(textfile))
    cli = Cli(tmp_path, capfd)
    table = str(tmp_path / "t")
    rows = [{"id": str(n), "v": n} for n in range(5)]

    code, _ = cli.write(table, rows, "--op", "insert", "--key", "id")

    assert code == 0
    run = samples(textfile)
    labels = {("command", "write"), ("table", table)}

    def value(name: str, **extra: str) -> float:
        return run[(name, frozenset(labels | set(extra.items())))]

    assert value("tidemark_job_last_run_success") == 1
    assert value("tidemark_job_rows") == 5
    assert value("tidemark_job_files") >= 1
    assert value("tidemark_job_lock_wait_seconds") >= 0
    assert value("tidemark_job_duration_seconds") > 0
    stages = {dict(key[1])["stage"] for key in run if key[0] == "tidemark_job_stage_seconds"}
    assert stages  # every stage the write timed

    code, _ = cli.write(table, [{"nope": 1}], "--op", "upsert")

    assert code != 0
    assert samples(textfile)[("tidemark_job_last_run_success", frozenset(labels))] == 0
