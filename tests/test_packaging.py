"""The package as users install it: the wheel in clean virtualenvs, without and with the
``spark`` extra (the base one exactly as the Dockerfile installs it), and the generated
stubs on the lowest grpcio and protobuf allowed."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest
from helm.chart import dockerfile_instructions, image_entrypoint
from serving import serve_and_check_health
from spark.sparkkit import hudi_rs_table

ROOT = Path(__file__).resolve().parent.parent
LOWEST_RUNTIME = ("grpcio==1.85.1", "protobuf==7.35.1")
"""The lower bounds in pyproject.toml: the generator's versions (grpcio-tools 1.85.1)."""
INSTALL_TIMEOUT_S = 900
pytestmark = pytest.mark.timeout(2 * INSTALL_TIMEOUT_S)
"""Installing pyspark into a new virtualenv takes minutes on a busy machine."""


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


def _clean_venv(path: Path, *requirements: str) -> Path:
    """A new virtualenv (no system site-packages) with ``requirements``; its bin dir."""
    venv.EnvBuilder(with_pip=True, clear=True).create(path)
    bin_dir = path / "bin"
    installed = _run(
        bin_dir / "python", "-m", "pip", "install", "--quiet", *requirements,
        cwd=path, timeout=INSTALL_TIMEOUT_S,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr[-4000:]
    return bin_dir


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
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=\[; ]", requirement)[0].lower() for requirement in dependencies}
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


def test_the_spark_extra_writes_a_table_hudi_reads(wheel: Path, tmp_path: Path) -> None:
    bin_dir = _clean_venv(tmp_path / "venv", f"{wheel}[spark]")
    (tmp_path / "events.csv").write_text("id,v\n1,a\n2,b\n3,c\n")
    table = tmp_path / "table"
    write = _run(
        bin_dir / "tidemark", "write", "--table", table, "--input", tmp_path / "events.csv",
        "--op", "bulk_insert", "--key", "id", "--master", "local[1]",
        cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert write.returncode == 0, write.stderr[-4000:]
    rows = hudi_rs_table(str(table))
    assert rows is not None
    assert sorted(rows.column("v").to_pylist()) == ["a", "b", "c"]


def test_the_stubs_import_with_the_lowest_allowed_runtime(tmp_path: Path) -> None:
    bin_dir = _clean_venv(tmp_path / "venv", *LOWEST_RUNTIME)
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
