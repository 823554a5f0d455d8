"""Helpers of the fault scenarios (fencing, write outcome, marker service).

Two kinds of child writer: ``Writer``, a ``tidemark write`` process that a test pauses,
resumes or kills as a whole process tree, and ``start_stopping_writer``, a write
(``outcome_writer.py``) that parks at a named stage until the test kills it. Two kinds of
data: Parquet inputs of ``write_input`` (model: ``model_rows``) and ``rows`` batches
(model: ``model_of``). Every scenario ends with ``assert_exactly_committed`` or
``assert_committed_and_clean``: the table holds exactly the committed rows, and no
pending instant, marker dir, marker-dir lease or temporary file is left.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
from spark.sparkkit import assert_readers_agree, data_files, hudi_rs_table

from tidemark.jobs.stages import StageListener
from tidemark.jobs.write import WriteResult, write
from tidemark.jobs.write_options import WriteOptions
from tidemark.storage import open_storage
from tidemark.storage.local import TEMP_MARKER
from tidemark.table import HoodieTable
from tidemark.table.files.file_names import is_base_file_name, parse_base_file_name
from tidemark.table.leases.storage_lease import LOCK_DIR
from tidemark.table.leases.write_lease import WRITES_DIR, live_writer
from tidemark.table.records.keys import RECORD_KEY
from tidemark.table.writes.markers import MARKER_LEASE_ROOT, TEMP_DIR

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DATA = ["id", "name", "part", "ts"]
"""The data columns of both kinds of input."""
PARTITIONS = ("p0", "p1", "p2", "p3")
WRITER_LEASE_S = 6.0
"""The lock lease of the ``tidemark write`` children, and of writes whose renewals a test
makes fail while they go on: short, so a test waits seconds for it to run out, yet 3 s of
safety margin, so a busy machine delaying a heartbeat does not lose the lock."""
LOCK_LEASE_S = 3.0
"""Short table-lock leases of the ``rows`` writes, so a writer that could not release (or
died) frees the table quickly, yet 1.5 s of safety margin: a renewal through the local S3
server on a busy 2-core machine can take most of a second."""
WAIT_S = 240.0

SCHEMA = "id int, name string, part string, ts long"
ARROW_SCHEMA = pa.schema(
    [("id", pa.int32()), ("name", pa.string()), ("part", pa.string()), ("ts", pa.int64())]
)
"""``SCHEMA`` as Arrow types."""
KEYS: dict[str, Any] = {
    "record_key_fields": ["id"],
    "partition_fields": ["part"],
    "precombine_field": "ts",
}
WRITER_SCRIPT = Path(__file__).with_name("outcome_writer.py")
STOP_LINE = "stopped"

Row = tuple[int, str, str, int]
Model = dict[str, str]
"""Record key -> the ``name`` column hudi-rs must read."""


# Parquet inputs of the ``tidemark write`` children


def write_input(path: Path, ids: range, name: str, ts: int = 1) -> Path:
    """A Parquet input of one row per id, spread over PARTITIONS."""
    table = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": pa.array([f"{name}-{i}" for i in ids]),
            "part": pa.array([PARTITIONS[i % len(PARTITIONS)] for i in ids]),
            "ts": pa.array([ts] * len(ids), pa.int64()),
        }
    )
    pq.write_table(table, path)
    return path


def model_rows(ids: range, name: str) -> dict[str, dict[str, Any]]:
    """What readers must return for rows written by ``write_input`` (keyed by record key)."""
    return {
        str(i): {"id": i, "name": f"{name}-{i}", "part": PARTITIONS[i % len(PARTITIONS)], "ts": 1}
        for i in ids
    }


# ``rows`` batches, written in this process or by a stopping writer


def rows(start: int, count: int, name: str, ts: int = 1) -> list[Row]:
    """``count`` rows from id ``start``, all named ``name``, in partitions p and q."""
    return [(i, name, "p" if i % 2 else "q", ts) for i in range(start, start + count)]


def model_of(*batches: list[Row]) -> Model:
    """The rows a reader must see after these batches committed (later ones win)."""
    return {str(row[0]): row[1] for batch in batches for row in batch}


def rows_to_parquet(path: Path, batch: list[Row]) -> Path:
    """``batch`` as a Parquet input of ``ARROW_SCHEMA``."""
    columns = {name: [row[i] for row in batch] for i, name in enumerate(DATA)}
    pq.write_table(pa.table(columns, schema=ARROW_SCHEMA), path)
    return path


def write_rows(
    spark: SparkSession,
    batch: list[Row],
    table: str,
    operation: str,
    listener: StageListener | None = None,
    **options: Any,
) -> WriteResult:
    """``write`` of ``batch`` in this process; ``options`` are ``WriteOptions``' fields."""
    frame = spark.createDataFrame(batch, SCHEMA)
    return write(spark, frame, table, operation, WriteOptions(**options), listener=listener)


def bulk_insert(spark: SparkSession, batch: list[Row], table: str, **options: Any) -> WriteResult:
    """A bulk insert of ``batch`` with ``KEYS`` (so it creates the table if there is none)."""
    return write_rows(spark, batch, table, "bulk_insert", **KEYS, **options)


# Child writers


def write_command(table: str, input_path: Path, operation: str, *options: str) -> list[str]:
    """The command line of a ``tidemark write`` child process (``write_args``)."""
    return [
        sys.executable,
        "-m",
        "tidemark.cli",
        *write_args(table, input_path, operation, *options),
    ]


def write_args(table: str, input_path: Path, operation: str, *options: str) -> list[str]:
    """The arguments of a ``tidemark write`` of ``input_path`` keyed by id, partitioned by
    part; ``options`` are more flags."""
    return [
        "write",
        "--table",
        table,
        "--input",
        str(input_path),
        "--op",
        operation,
        "--key",
        "id",
        "--partition",
        "part",
        *options,
    ]


@dataclass
class Writer:
    """A ``tidemark write`` child process, leader of a new session so that it (and the JVM
    and Python workers below it) can be paused and killed together."""

    process: subprocess.Popen[str]

    @classmethod
    def start(
        cls,
        table: str,
        input_path: Path,
        operation: str,
        *options: str,
        env: dict[str, str] | None = None,
    ) -> Writer:
        """``options`` are more ``tidemark write`` flags; ``env`` overrides variables."""
        command = write_command(
            table,
            input_path,
            operation,
            "--markers",
            "direct",
            "--master",
            "local[2]",
            "--lock-lease-s",
            str(WRITER_LEASE_S),
            *options,
        )
        process = subprocess.Popen(
            command,
            env={**os.environ, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        return cls(process)

    def signal_tree(self, signum: signal.Signals) -> None:
        """Send ``signum`` to the writer and every process below it (PySpark's worker
        daemon runs in a process group of its own)."""
        for pid in process_tree(self.process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    def finish(self) -> tuple[int, str, str]:
        """Wait for the exit; returns (exit code, stdout, stderr)."""
        out, err = self.process.communicate(timeout=WAIT_S)
        return self.process.returncode, out, err

    def kill(self) -> None:
        """SIGKILL the whole tree (also the test's clean-up when a scenario failed)."""
        if self.process.poll() is None:
            self.signal_tree(signal.SIGCONT)
            self.signal_tree(signal.SIGKILL)
        self.process.communicate(timeout=WAIT_S)


def process_tree(root: int) -> list[int]:
    """``root`` and its descendants, from /proc (parents before children)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    tree, pending = [], [root]
    while pending:
        pid = pending.pop(0)
        tree.append(pid)
        pending.extend(children.get(pid, []))
    return tree


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


# Waiting and looking at the table


def wait_for(condition: Callable[[], bool], what: str, writer: Writer | None = None) -> None:
    """Poll ``condition``; fail naming ``what`` (with the writer's output if it exited)."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if writer is not None and writer.process.poll() is not None:
            code, out, err = writer.finish()
            raise AssertionError(f"writer exited {code} before {what}: {out}{err[-3000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def has_markers(uri: str) -> bool:
    """A task of a running write created a marker, i.e. the writer is writing files."""
    return any(True for _ in open_storage(uri).list(f"{TEMP_DIR}/"))


def wait_for_write_lease_expiry(uri: str, instant: str) -> None:
    """Until the lease of write ``instant`` ran out (its writer stopped renewing): from
    then on the next write rolls it back."""
    storage = open_storage(uri)
    wait_for(lambda: live_writer(storage, instant) is None, f"write {instant}'s lease to expire")


@dataclass(frozen=True)
class StoredLease:
    """The newest lock generation of a table, as stored."""

    path: str
    expires_at: float
    released: bool

    @classmethod
    def latest(cls, uri: str) -> StoredLease | None:
        storage = open_storage(uri)
        paths = sorted(info.path for info in storage.list(f"{LOCK_DIR}/"))
        if not paths:
            return None
        lease = json.loads(storage.read(paths[-1]))
        return cls(paths[-1], float(lease["expires_at"]), bool(lease["released"]))


def error_line(stderr: str) -> str:
    """The one-line error a failed command printed (``tidemark <command>: error: ...``),
    else its last non-empty line: a Spark JVM stopped with its tasks may print stack
    lines after it."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("tidemark ") and ": error: " in line]
    return (errors or lines)[-1]


def completed_instants(uri: str, actions: frozenset[str] | None = None) -> list[str]:
    """The timestamps of the completed instants (of ``actions``, default all), in order."""
    return [i.timestamp for i in HoodieTable.open(uri).timeline.completed(actions)]


def newest_pending(uri: str) -> str:
    """The timestamp of the one pending instant."""
    [pending] = HoodieTable.open(uri).timeline.pending()
    return pending.timestamp


def temporary_files(uri: str) -> list[str]:
    """Unpublished temporaries anywhere in a local table (S3 never has any)."""
    if "://" in uri:
        return []
    return sorted(
        str(path.relative_to(uri)) for path in Path(uri).rglob("*") if TEMP_MARKER in path.name
    )


def temporary_data_files(uri: str) -> list[str]:
    """The temporaries of data files being written, which live as long as their task."""
    return [path for path in temporary_files(uri) if f".parquet{TEMP_MARKER}" in path]


# End states


def assert_clean(uri: str) -> None:
    """No marker dir, marker-dir lease, write lease or temporary file anywhere in the
    table."""
    storage = open_storage(uri)
    assert list(storage.list(f"{TEMP_DIR}/")) == []
    assert list(storage.list(f"{MARKER_LEASE_ROOT}/")) == []
    assert list(storage.list(f"{WRITES_DIR}/")) == []
    assert temporary_files(uri) == []


def assert_table_holds(uri: str, model: Model) -> None:
    """hudi-rs reads exactly ``model``, no key twice, and no pending instant is left."""
    table = hudi_rs_table(uri)
    keys = table.column(RECORD_KEY).to_pylist() if table is not None else []
    assert len(keys) == len(set(keys)), "a key is read twice"
    names = dict(zip(keys, table.column("name").to_pylist(), strict=True)) if table else {}
    assert names == model
    assert HoodieTable.open(uri).timeline.pending() == []


def assert_committed_and_clean(uri: str, model: Model) -> None:
    """The end state of a ``rows`` scenario: ``assert_table_holds`` and ``assert_clean``."""
    assert_table_holds(uri, model)
    assert_clean(uri)


def assert_exactly_committed(uri: str, model: dict[str, dict[str, Any]]) -> None:
    """The end state of a ``write_input`` scenario, after the next write: both readers
    return exactly the model, no key twice; no pending instant, marker dir, marker lease,
    held lock, temporary file or data file of an uncommitted instant is left."""
    read = assert_readers_agree(uri, DATA)
    assert {key: {c: row[c] for c in DATA} for key, row in read.items()} == model
    theirs = hudi_rs_table(uri)
    assert theirs is not None and theirs.num_rows == len(model)
    assert HoodieTable.open(uri).timeline.pending() == []
    assert_clean(uri)
    lease = StoredLease.latest(uri)
    assert lease is not None and lease.released
    committed = completed_instants(uri)
    for path in data_files(uri):
        name = path.rpartition("/")[2]
        assert is_base_file_name(name) and parse_base_file_name(name).instant in committed, path
