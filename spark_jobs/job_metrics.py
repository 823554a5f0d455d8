"""A Spark job's run as Prometheus metrics: a textfile or a Pushgateway.

A job is a process that ends, so nothing scrapes it: with ``TIDEMARK_METRICS_TEXTFILE``
set the run's metrics are written (atomically) to that file, for node_exporter's
textfile collector (name it ``*.prom`` in its ``--collector.textfile.directory``); with
``TIDEMARK_METRICS_PUSHGATEWAY`` (``host:port``) they are pushed to a Pushgateway under
``job="tidemark"`` and the command and table. Both, either or neither may be set. The
metrics are those of the job's result (stage times, lock waits, rows, files) and its
outcome (``tidemark_job_last_run_success`` 0 after a failed run). Reporting never fails
the job: an unreachable Pushgateway is a warning.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import structlog
from prometheus_client import CollectorRegistry, Gauge, push_to_gateway, write_to_textfile

log = structlog.get_logger(__name__)

TEXTFILE_ENV = "TIDEMARK_METRICS_TEXTFILE"
PUSHGATEWAY_ENV = "TIDEMARK_METRICS_PUSHGATEWAY"
PUSH_TIMEOUT_S = 10.0


@dataclass
class RunFigures:
    """What a successful run reports, filled in from its result."""

    stage_seconds: dict[str, float] = field(default_factory=dict)
    lock_wait_s: float = 0.0
    rows: int = 0
    files: int = 0


@contextmanager
def reported(command: str, table: str) -> Iterator[RunFigures]:
    """Time the block and report it: its figures when it ends, a failure when it raises."""
    figures = RunFigures()
    began = time.monotonic()
    try:
        yield figures
    except BaseException:
        report(command, table, ok=False, seconds=time.monotonic() - began)
        raise
    report(
        command,
        table,
        ok=True,
        seconds=time.monotonic() - began,
        stage_seconds=figures.stage_seconds,
        lock_wait_s=figures.lock_wait_s,
        rows=figures.rows,
        files=figures.files,
    )


def report(
    command: str,
    table: str,
    *,
    ok: bool,
    seconds: float,
    stage_seconds: Mapping[str, float] | None = None,
    lock_wait_s: float = 0.0,
    rows: int = 0,
    files: int = 0,
) -> None:
    """Publish one run of ``command`` (write, cluster_run, index_build) on ``table``."""
    textfile, gateway = os.environ.get(TEXTFILE_ENV), os.environ.get(PUSHGATEWAY_ENV)
    if not textfile and not gateway:
        return
    registry = CollectorRegistry()
    labels = {"command": command, "table": table}

    def gauge(name: str, help_text: str, value: float, **extra: str) -> None:
        metric = Gauge(name, help_text, [*labels, *extra], registry=registry)
        metric.labels(**labels, **extra).set(value)

    gauge("tidemark_job_last_run_timestamp_seconds", "When the last run ended.", time.time())
    gauge("tidemark_job_last_run_success", "1 if the last run succeeded, else 0.", int(ok))
    gauge("tidemark_job_duration_seconds", "Wall time of the last run.", seconds)
    if ok:
        gauge("tidemark_job_lock_wait_seconds", "Table lock wait of the last run.", lock_wait_s)
        gauge("tidemark_job_rows", "Rows the last run wrote.", rows)
        gauge("tidemark_job_files", "Files the last run wrote.", files)
        stages = Gauge(
            "tidemark_job_stage_seconds",
            "Stage times of the last run.",
            [*labels, "stage"],
            registry=registry,
        )
        for stage, stage_s in (stage_seconds or {}).items():
            stages.labels(**labels, stage=stage).set(stage_s)
    if textfile:
        write_to_textfile(textfile, registry)
    if gateway:
        try:
            push_to_gateway(
                gateway,
                job="tidemark",
                grouping_key=labels,
                registry=registry,
                timeout=PUSH_TIMEOUT_S,
            )
        except OSError as error:
            log.warning("metrics.push_failed", pushgateway=gateway, error=str(error))
