"""The package as users install it: the wheel in clean virtualenvs, without and with the
``spark`` extra (the base one exactly as the Dockerfile installs it; the extra at the lowest
and at the highest versions the bounds allow), and the generated stubs on the lowest grpcio
and protobuf allowed."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
import venv
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helm.chart import dockerfile_instructions, image_entrypoint
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version
from serving import serve_and_check_health
from spark.sparkkit import hudi_rs_table

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
LOWEST_RUNTIME = ("grpcio==1.85.1", "protobuf==7.35.1")
"""The lower bounds in pyproject.toml: the generator's versions (grpcio-tools 1.85.1)."""
STRUCTLOG_LOWEST = "structlog==24.1.0"
TENACITY_LOWEST = "tenacity==9.0.0"
"""structlog's lower bound in pyproject.toml."""
INSTALL_TIMEOUT_S = 900
pytestmark = pytest.mark.timeout(2 * INSTALL_TIMEOUT_S)
"""Installing pyspark into a new virtualenv takes minutes on a busy machine."""
TIMES = [
    datetime(1969, 7, 20, 20, 17, 40, tzinfo=UTC),
    datetime(2024, 3, 31, 1, 30, 0, 123456, tzinfo=UTC),
]
"""Timestamps before the epoch and with microseconds."""
WRITE_AND_READ = """
import atexit, json, os, sys
from pyspark.sql.functions import unix_micros
import tidemark.spark
from tidemark.cli import main
from tidemark.jobs.session import build_session

events, table = sys.argv[1:]
write = ["write", "--table", table, "--input", events, "--op", "bulk_insert", "--key", "id"]
assert main([*write, "--master", "local[1]"]) == 0
spark = build_session("local[1]")  # the write's
tidemark.spark.register(spark)
for frame in (tidemark.spark.read(spark, table), spark.read.format("tidemark").load(table)):
    frame = frame.select("id", unix_micros("at").alias("at"))
    print(json.dumps(sorted([row.id, row.at] for row in frame.collect())))
spark.stop()
atexit._run_exitfuncs()  # and no interpreter teardown, as tidemark.cli.run ends
sys.stdout.flush()
os._exit(0)
"""
"""Run in the virtualenv: ``tidemark write`` of ``events`` into a new table, then, in the
same process (one JVM), the table read back with ``tidemark.spark.read`` and through the
data source (the driver's first data source lookup, which starts PySpark's planner
worker). Ids and timestamps in microseconds since the epoch, so no time zone comes
between."""


def _run(*command: str | Path, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _clean_venv(path: Path, *requirements: str, resolution: str | None = None) -> Path:
    """A new virtualenv (no system site-packages) with ``requirements``; its bin dir.
    With a ``resolution``, uv installs them (``lowest-direct``: each requirement named at
    the lowest version it allows, which pip cannot do), else the virtualenv's pip. uv
    without its cache: a run costs what it costs on a fresh CI machine, and leaves no
    gigabytes of pyspark sources and builds behind."""
    venv.EnvBuilder(with_pip=resolution is None, clear=True).create(path)
    bin_dir = path / "bin"
    install: list[str | Path]
    if resolution is None:
        install = [bin_dir / "python", "-m", "pip", "install"]
    else:
        install = [sys.executable, "-m", "uv", "pip", "install", "--python", bin_dir / "python",
                   "--resolution", resolution, "--no-cache"]  # fmt: skip
    installed = _run(*install, "--quiet", *requirements, cwd=path, timeout=INSTALL_TIMEOUT_S)
    assert installed.returncode == 0, installed.stderr[-4000:]
    return bin_dir


def _installed(bin_dir: Path) -> dict[str, Version]:
    """The version of each distribution in the virtualenv of ``bin_dir``, by canonical name."""
    listed = _run(
        sys.executable, "-m", "uv", "pip", "list", "--python", bin_dir / "python",
        "--format", "json", cwd=bin_dir,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    return {
        canonicalize_name(package["name"]): Version(package["version"])
        for package in json.loads(listed.stdout)
    }


def _lower_bound(requirement: Requirement) -> Version:
    (lowest,) = [spec.version for spec in requirement.specifier if spec.operator == ">="]
    return Version(lowest)


PYSPARK_PLANNER_FLUSH_RACE = re.compile(
    r"Traceback \(most recent call last\):\n"
    r'(  File "[^"]*/pyspark/daemon\.py", line \d+, in (manager|worker)\n){0,2}'
    r"(BrokenPipeError: \[Errno 32\] Broken pipe\n|[^\n]*\Z)"
)
"""PySpark's daemon reporting that a planner worker (``pyspark.sql.worker.lookup_data_sources``,
run once per driver at its first data source lookup, or a Python data source's planner
workers) found its socket closed at its last flush: a race inside PySpark 4.1.0-4.3.0 (3 to
4 runs in 10 of a write, the worker's module logged from a patched daemon). The JVM
forwards the daemon's stderr, so a driver ending at once may cut the report anywhere: whole,
or cut short at the very end of the output. Those workers are forked by PySpark's own
daemon with PySpark's own worker loop, whatever ``spark.python.worker.module`` says, so
Tidemark's quiet worker cannot end them quietly."""


def _tracebacks_of_ours(stderr: str) -> str:
    """``stderr`` without PySpark's planner-worker race (above): what is left is ours."""
    return PYSPARK_PLANNER_FLUSH_RACE.sub("", stderr)


def _micros(moment: datetime) -> int:
    return (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


def _dockerfile_pip(subcommand: str, wheels: Path) -> list[str]:
    """The arguments of the Dockerfile's ``RUN pip <subcommand> ...`` (up to ``&&``), with
    its wheel folder made ``wheels`` and its build context the repository."""
    (run,) = [
        args.split("&&")[0]
        for name, args in dockerfile_instructions()
        if name == "RUN" and args.startswith(f"pip {subcommand} ")
    ]
    local = {"/wheels": str(wheels), ".": str(ROOT)}
    return [local.get(arg, arg) for arg in shlex.split(run)[2:]]


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What the Dockerfile's build stage makes: the base package's wheel and a wheel of
    every dependency it resolves to (from pip's index and caches, as configured here)."""
    out = tmp_path_factory.mktemp("wheelhouse")
    built = _run(
        sys.executable, "-m", "pip", "wheel", "--quiet", *_dockerfile_pip("wheel", out),
        cwd=out, timeout=INSTALL_TIMEOUT_S,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-4000:]
    return out


@pytest.fixture(scope="module")
def wheel(wheelhouse: Path) -> Path:
    (path,) = wheelhouse.glob("tidemark_hudi-*.whl")
    return path


def test_the_image_installs_the_base_package_and_serves_as_non_root() -> None:
    names = {canonicalize_name(Requirement(text).name) for text in PROJECT["dependencies"]}
    assert "pyspark" not in names and "pandas" not in names
    instructions = dict(dockerfile_instructions())  # the last of each kind
    assert image_entrypoint() == ["tidemark", "serve"]
    user = instructions["USER"].split(":")
    assert all(int(part) != 0 for part in user)
    assert "[" not in " ".join(_dockerfile_pip("install", Path("/wheels")))  # no extras


def test_the_base_package_serves_without_pyspark(wheelhouse: Path, tmp_path: Path) -> None:
    """The image's install, without Docker: its own pip command in a clean virtualenv,
    from the wheelhouse alone (``--no-index``), so a missing dependency fails here."""
    assert not list(wheelhouse.glob("pyspark-*")) and not list(wheelhouse.glob("pandas-*"))
    install = _dockerfile_pip("install", wheelhouse)
    assert "--no-index" in install
    bin_dir = _clean_venv(tmp_path / "venv", *install)
    assert _run(bin_dir / "python", "-c", "import pyspark", cwd=tmp_path).returncode != 0
    version = _run(bin_dir / "tidemark", "--version", cwd=tmp_path)
    assert version.stdout.strip() == "tidemark 0.1.0"
    serve_and_check_health(
        [str(bin_dir / "tidemark"), "serve", "all", "--port", "0", "--metrics-port", "0"],
        tmp_path,
    )
    write = _run(
        bin_dir / "tidemark", "write", "--table", tmp_path / "t", "--input", "x.csv",
        cwd=tmp_path,
    )  # fmt: skip
    assert write.returncode == 2
    assert write.stderr.strip().splitlines() == [
        "tidemark write: error: command: tidemark write runs Spark jobs, and pyspark is not "
        "installed: "
        "pip install 'tidemark-hudi[spark]'"
    ]
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize("resolution", ["lowest-direct", "highest"])
def test_the_spark_extra_writes_and_reads_timestamps_at_both_ends_of_the_bounds(
    wheel: Path, tmp_path: Path, resolution: str
) -> None:
    """The wheel with the ``spark`` extra, every dependency at the lowest version its bound
    in pyproject.toml allows, then at the highest: ``tidemark write`` of a table with a
    timestamp column, read back by Spark (``read`` and the data source) and by hudi-rs,
    with no traceback and no pandas warning on stderr."""
    bounds = [
        Requirement(text)
        for text in [*PROJECT["dependencies"], *PROJECT["optional-dependencies"]["spark"]]
    ]
    bin_dir = _clean_venv(
        tmp_path / "venv", f"{wheel}[spark]", *map(str, bounds), resolution=resolution
    )
    if resolution == "lowest-direct":
        installed = _installed(bin_dir)
        assert {bound.name: installed[canonicalize_name(bound.name)] for bound in bounds} == {
            bound.name: _lower_bound(bound) for bound in bounds
        }
    events = tmp_path / "events.parquet"
    pq.write_table(
        pa.table({"id": ["a", "b"], "at": pa.array(TIMES, pa.timestamp("us", tz="UTC"))}), events
    )
    table = tmp_path / "table"
    micros = [["a", _micros(TIMES[0])], ["b", _micros(TIMES[1])]]
    job = _run(bin_dir / "python", "-c", WRITE_AND_READ, events, table, cwd=tmp_path, timeout=600)
    assert job.returncode == 0, job.stderr[-4000:]
    assert "pandas >= 3" not in job.stderr, job.stderr
    assert "Traceback" not in _tracebacks_of_ours(job.stderr), job.stderr
    read, through_the_source = (json.loads(line) for line in job.stdout.splitlines()[-2:])
    assert read == through_the_source == micros
    rows = hudi_rs_table(str(table))
    assert rows is not None
    assert rows.sort_by("id").select(["id", "at"]).to_pylist() == [
        {"id": "a", "at": TIMES[0]},
        {"id": "b", "at": TIMES[1]},
    ]


def test_the_stubs_import_with_the_lowest_allowed_runtime(tmp_path: Path) -> None:
    """The generated stubs with grpcio and protobuf at their lower bounds (and structlog and
    tenacity, which ``import tidemark`` needs for the library's quiet log defaults and the
    configuration's retry policy)."""
    bin_dir = _clean_venv(tmp_path / "venv", *LOWEST_RUNTIME, STRUCTLOG_LOWEST, TENACITY_LOWEST)
    imported = _run(
        bin_dir / "python", "-c",
        "import grpc, google.protobuf as p;"
        "import tidemark.proto.marker.v1.marker_service_pb2_grpc,"
        " tidemark.proto.index.v1.index_service_pb2_grpc,"
        " tidemark.proto.planner.v1.planner_service_pb2_grpc;"
        "print(grpc.__version__, p.__version__)",
        cwd=ROOT,
    )  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.split() == [version.split("==")[1] for version in LOWEST_RUNTIME]
