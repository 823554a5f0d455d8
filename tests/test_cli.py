"""``tidemark`` wiring: each command is registered by the module the CLI imports for it,
and a service starts without importing Spark."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tidemark.cli import COMMAND_MODULES, build_parser, main


def _registered_commands(module_name: str) -> set[str]:
    parser = argparse.ArgumentParser()
    subparsers = parser.add_subparsers()
    importlib.import_module(module_name).register(subparsers)
    return set(subparsers.choices)


@pytest.mark.parametrize("module_name", sorted(set(COMMAND_MODULES.values())))
def test_each_module_registers_exactly_the_commands_mapped_to_it(module_name: str) -> None:
    mapped = {command for command, module in COMMAND_MODULES.items() if module == module_name}
    assert _registered_commands(module_name) == mapped


def test_serving_imports_no_spark() -> None:
    probe = (
        "import sys\n"
        "from tidemark.cli import build_parser\n"
        "from tidemark.rpc.registry import resolve_services\n"
        "build_parser('serve').parse_args(['serve', 'all'])\n"
        "resolve_services('all')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pyspark'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]"


def test_unknown_commands_list_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["no-such-command"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert all(command in error for command in COMMAND_MODULES)


def test_help_is_written_for_users(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    shown = capsys.readouterr().out
    assert "Apache Hudi copy-on-write tables on S3 or a local disk" in shown
    assert "tidemark write --table s3://lake/events" in shown  # an example per common task
    assert "docs/cli.md" in shown
    assert "module" not in shown and "import" not in shown  # no notes for developers
    assert all(command in shown for command in COMMAND_MODULES)


@pytest.mark.parametrize("command", sorted(COMMAND_MODULES))
def test_every_command_parses_from_its_own_module(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser(command).parse_args([command, "--help"])
    assert exit_info.value.code == 0
    assert f"usage: tidemark {command}" in capsys.readouterr().out


@pytest.mark.parametrize(
    "command",
    [["write", "--op", "upsert", "--input"], ["index", "build"], ["demo", "--rows", "10"]],
)
def test_a_missing_java_is_one_line_and_leaves_the_table_as_it_was(
    command: list[str], tmp_path: Path
) -> None:
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": [1, 2], "v": ["a", "b"]}), source)
    table = tmp_path / "table"
    assert main(["create", "--table", str(table), "--schema-from", str(source), "--key", "id"]) == 0
    before = _files(table)
    arguments = [*command, str(source)] if command[0] == "write" else command
    where = (
        ["--storage", str(tmp_path / "demo")] if command[0] == "demo" else ["--table", str(table)]
    )
    result = subprocess.run(
        [sys.executable, "-m", "tidemark.cli", *arguments, *where],
        env={**os.environ, "JAVA_HOME": str(tmp_path / "no-jdk")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines()[-1].endswith(
        f"java: Spark needs Java 17 or newer: JAVA_HOME={tmp_path}/no-jdk has no bin/java"
    )
    assert "Traceback" not in result.stderr
    assert _files(table) == before


def _files(root: Path) -> dict[str, bytes]:
    return {str(path): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def test_a_service_logs_info_json_on_stderr_and_prints_only_its_address(tmp_path: Path) -> None:
    tidemark = Path(sys.executable).with_name("tidemark")
    serve = [str(tidemark), "serve", "marker", "--port", "0", "--metrics-port", "0"]
    process = subprocess.Popen(
        [*serve, "--allowed-root", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "TIDEMARK_LOG_LEVEL"},
    )
    assert process.stdout is not None
    listening = process.stdout.readline()  # printed once the server is up
    process.terminate()
    rest, err = process.communicate(timeout=60)
    assert listening.startswith("listening on 127.0.0.1:")
    assert rest == ""
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    ready = [line for line in lines if line["event"] == "marker service ready"]
    assert ready and ready[0]["level"] == "info"
