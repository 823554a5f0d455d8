"""Helpers of the fault scenarios: writers as child processes (``tidemark write``) that a
test pauses, resumes or kills as a whole process tree, input files, and the end-of-scenario
check that the table holds exactly the committed rows and nothing else."""

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
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from spark.sparkkit import assert_readers_agree, data_files, hudi_rs_table

from tidemark.storage import open_storage
from tidemark.storage.local import TEMP_MARKER
from tidemark.table.lock import LOCK_DIR
from tidemark.table.markers import MARKER_LEASE_ROOT, TEMP_DIR
from tidemark.table.naming import is_base_file_name, parse_base_file_name
from tidemark.table.table import HoodieTable

DATA = ["id", "name", "part", "ts"]
PARTITIONS = ("p0", "p1", "p2", "p3")
WRITER_LEASE_S = 6.0
"""The child writers' lock lease: short, so a test waits seconds for it to run out, yet
3 s of safety margin, so a busy machine delaying a heartbeat does not lose the lock."""
WAIT_S = 240.0


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
        command = [
            sys.executable,
            "-m",
            "tidemark.cli",
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
            "--markers",
            "direct",
            "--master",
            "local[2]",
            "--lock-lease-s",
            str(WRITER_LEASE_S),
            *options,
        ]
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


def wait_for_lease_expiry(uri: str) -> None:
    """Until the newest lock generation's lease ran out (its holder stopped renewing)."""

    def expired() -> bool:
        lease = StoredLease.latest(uri)
        return lease is not None and lease.expires_at < time.time()

    wait_for(expired, "the lock lease to expire")


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
    """The last non-empty line a failed command printed."""
    return [line for line in stderr.splitlines() if line.strip()][-1]


def completed_instants(uri: str) -> set[str]:
    return {i.timestamp for i in HoodieTable.open(uri).timeline.completed()}


def assert_exactly_committed(uri: str, model: dict[str, dict[str, Any]]) -> None:
    """The end state of every scenario, after the next write: both readers return exactly
    the model, no key twice; no pending instant, marker dir, marker lease, held lock,
    temporary file or data file of an uncommitted instant is left."""
    rows = assert_readers_agree(uri, DATA)
    assert {key: {c: row[c] for c in DATA} for key, row in rows.items()} == model
    theirs = hudi_rs_table(uri)
    assert theirs is not None and theirs.num_rows == len(model)
    table = HoodieTable.open(uri)
    assert table.timeline.pending() == []
    storage = table.storage
    assert list(storage.list(f"{TEMP_DIR}/")) == []
    assert list(storage.list(f"{MARKER_LEASE_ROOT}/")) == []
    lease = StoredLease.latest(uri)
    assert lease is not None and lease.released
    committed = completed_instants(uri)
    for path in data_files(uri):
        name = path.rpartition("/")[2]
        assert is_base_file_name(name) and parse_base_file_name(name).instant in committed, path
    assert temporary_files(uri) == []


def temporary_files(uri: str) -> list[str]:
    """Unpublished temporaries anywhere in a local table (S3 never has any)."""
    if uri.startswith("s3://"):
        return []
    return sorted(
        str(path.relative_to(uri)) for path in Path(uri).rglob("*") if TEMP_MARKER in path.name
    )


def newest_pending(uri: str) -> str:
    [pending] = HoodieTable.open(uri).timeline.pending()
    return pending.timestamp
