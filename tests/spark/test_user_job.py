"""A user's own job, run as the issue's user ran it: the venv's Python called by path (not
activated, so ``python3`` on PATH lacks pyspark and tidemark), a plain
``SparkSession.builder`` on a local master, no ``PYSPARK_PYTHON``. Its executors run on the
driver's Python, its stdout holds only what the job printed and its stderr no line of
Tidemark's below WARNING; ``TIDEMARK_LOG_LEVEL`` lowers that floor."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

JOB = """
import sys
from pyspark.sql import SparkSession

import tidemark.spark
from tidemark.spark import WriteOptions

spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
table = sys.argv[1]
rows = spark.createDataFrame([(1, "ann"), (2, "bob"), (3, "cy")], "id long, user string")
tidemark.spark.write(rows, table, "bulk_insert", options=WriteOptions(record_key_fields=["id"]))
tidemark.spark.write(rows.where("id = 2"), table, "upsert")
print("executors ran", spark.sparkContext.pythonExec)
print("rows", tidemark.spark.read(spark, table, reader="scan").count())
"""

LEVELS = re.compile(r"\[(debug|info|warning|error|critical)\s*\]")
"""The level field of Tidemark's console lines (``use_library_defaults``)."""


def run_job(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The job in a fresh process whose PATH's ``python3`` is the venv's base Python."""
    bare = tmp_path / "bare-bin"
    bare.mkdir(exist_ok=True)
    base = Path(sys.base_prefix) / "bin" / "python3"
    (bare / "python3").unlink(missing_ok=True)
    (bare / "python3").symlink_to(base)
    environment = {
        k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "TIDEMARK_"))
    }
    environment.pop("VIRTUAL_ENV", None)
    environment["PATH"] = f"{bare}{os.pathsep}{environment['PATH']}"
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(JOB), str(tmp_path / "t")],
        cwd=tmp_path,
        env={**environment, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def quiet_job(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    return run_job(tmp_path_factory.mktemp("job"))


def test_a_local_session_runs_its_executors_on_the_drivers_python(
    quiet_job: subprocess.CompletedProcess[str],
) -> None:
    assert quiet_job.returncode == 0, quiet_job.stderr[-3000:]
    assert f"executors ran {sys.executable}\n" in quiet_job.stdout


def test_a_users_job_gets_no_tidemark_line_on_stdout_and_only_warnings_on_stderr(
    quiet_job: subprocess.CompletedProcess[str],
) -> None:
    assert quiet_job.returncode == 0, quiet_job.stderr[-3000:]
    assert quiet_job.stdout == f"executors ran {sys.executable}\nrows 3\n"
    levels = set(LEVELS.findall(quiet_job.stderr))
    assert levels <= {"warning", "error", "critical"}, quiet_job.stderr[-3000:]


def test_the_level_env_var_lowers_the_floor_to_info_on_stderr(tmp_path: Path) -> None:
    done = run_job(tmp_path, TIDEMARK_LOG_LEVEL="info")
    assert done.returncode == 0, done.stderr[-3000:]
    assert not LEVELS.search(done.stdout)
    levels = set(LEVELS.findall(done.stderr))
    assert "info" in levels and "debug" not in levels, done.stderr[-3000:]
