"""Shared pieces of the write-outcome, marker-service and error-message fault tests.

Every scenario ends with ``assert_table_holds``: hudi-rs reads exactly
the rows of the model, no key twice, no pending instant, and ``assert_clean``: no marker
dir, marker-dir lease or temporary file left.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from spark.sparkkit import hudi_rs_table

from tidemark.s3local import FaultProxy
from tidemark.storage import open_storage
from tidemark.storage.local import TEMP_MARKER
from tidemark.storage.retry import MAX_ATTEMPTS_ENV
from tidemark.table.keys import RECORD_KEY
from tidemark.table.markers import MARKER_LEASE_ROOT, TEMP_DIR
from tidemark.table.table import HoodieTable

SCHEMA = "id int, name string, part string, ts long"
KEYS: dict[str, Any] = {
    "record_key_fields": ["id"],
    "partition_fields": ["part"],
    "precombine_field": "ts",
}
LOCK_LEASE_S = 1.5
"""Short table-lock leases, so a writer that could not release (or died) frees the
table quickly."""
WRITER_SCRIPT = Path(__file__).with_name("outcome_writer.py")
STOP_LINE = "stopped"

Row = tuple[int, str, str, int]
Model = dict[str, str]
"""Record key -> the ``name`` column hudi-rs must read."""


def rows(start: int, count: int, name: str, ts: int = 1) -> list[Row]:
    return [(i, name, "p" if i % 2 else "q", ts) for i in range(start, start + count)]


def model_of(*batches: list[Row]) -> Model:
    """The rows a reader must see after these batches committed (later ones win)."""
    return {str(row[0]): row[1] for batch in batches for row in batch}


def assert_table_holds(uri: str, model: Model) -> None:
    """hudi-rs reads exactly ``model``, no key twice, and no pending instant is left."""
    table = hudi_rs_table(uri)
    keys = table.column(RECORD_KEY).to_pylist() if table is not None else []
    assert len(keys) == len(set(keys)), "a key is read twice"
    names = dict(zip(keys, table.column("name").to_pylist(), strict=True)) if table else {}
    assert names == model
    timeline = HoodieTable.open(uri).timeline
    timeline.reload()
    assert timeline.pending() == []


def assert_clean(uri: str) -> None:
    """No marker dir, marker-dir lease or temporary file anywhere in the table."""
    storage = open_storage(uri)
    assert list(storage.list(f"{TEMP_DIR}/")) == []
    assert list(storage.list(f"{MARKER_LEASE_ROOT}/")) == []
    if "://" not in uri:
        assert [str(path) for path in Path(uri).rglob(f"*{TEMP_MARKER}*")] == []


class StageHook:
    """A write's stage listener running an action when a named stage starts or ends."""

    def __init__(
        self,
        *,
        started: dict[str, Callable[[], object]] | None = None,
        finished: dict[str, Callable[[], object]] | None = None,
    ) -> None:
        self.started = started or {}
        self.finished = finished or {}

    def stage_started(self, name: str) -> None:
        if name in self.started:
            self.started[name]()

    def stage_finished(self, name: str, seconds: float) -> None:
        if name in self.finished:
            self.finished[name]()


@pytest.fixture
def proxy(s3_server: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    """A fault proxy between the driver (this process) and the S3 server; executors keep
    talking to the server directly. Two attempts per storage request keep failures fast."""
    with FaultProxy(s3_server) as fault_proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", fault_proxy.endpoint)
        monkeypatch.setenv(MAX_ATTEMPTS_ENV, "2")
        yield fault_proxy


def start_stopping_writer(
    table: str,
    batch: list[Row],
    operation: str,
    *,
    stop_at: str,
    marker_service: str | None = None,
    idempotency_key: str | None = None,
) -> subprocess.Popen[str]:
    """A writer process (``outcome_writer.py``) that stops at ``stop_at``
    (``started:<stage>`` or ``finished:<stage>``) and waits there to be killed."""
    spec = {
        "table": table,
        "rows": batch,
        "operation": operation,
        "stop_at": stop_at,
        "marker_service": marker_service,
        "idempotency_key": idempotency_key,
        "lock_lease_s": LOCK_LEASE_S,
        "keys": KEYS,
    }
    process = subprocess.Popen(
        [sys.executable, str(WRITER_SCRIPT), json.dumps(spec)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=dict(os.environ),
    )
    assert process.stdout is not None
    for line in process.stdout:
        if line.strip() == STOP_LINE:
            return process
    process.wait()
    raise AssertionError(f"the writer exited ({process.returncode}) before {stop_at}")
