"""docs/cli.md's command reference is generated from the argparse parsers: this fails when
it is stale, and checks that the generator covers every command and flag."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from tidemark.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "docs" / "cli.md"


def cli_reference(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "cli_reference.py"), *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_cli_reference_matches_the_parsers() -> None:
    result = cli_reference("--check")
    assert result.returncode == 0, result.stdout + result.stderr


def parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """``parser`` and every parser below it."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += parsers(sub)
    return found


def test_every_command_and_flag_has_its_section() -> None:
    text = REFERENCE.read_text()
    for parser in parsers(build_parser()):
        heading = "#" * (parser.prog.count(" ") + 2) + f" `{parser.prog}`\n"
        assert f"\n{heading}" in text, heading
        section = text.split(heading, 1)[1].split("\n#", 1)[0]
        for action in parser._actions:
            shown = action.help != argparse.SUPPRESS and action.option_strings != ["-h", "--help"]
            for flag in action.option_strings:
                assert (f"| `{flag}" in section) == shown, (parser.prog, flag)
    assert "| `--table TABLE` | required | table base URI" in text


def test_check_fails_on_an_edited_reference_and_regenerating_restores_it(tmp_path: Path) -> None:
    page = tmp_path / "cli.md"
    text = REFERENCE.read_text()
    page.write_text(text.replace("| `--keys-file FILE` |", "| `--keys-file PATH` |", 1))

    stale = cli_reference("--check", "--doc", str(page))
    assert stale.returncode == 1
    assert "is stale" in stale.stderr
    assert cli_reference("--doc", str(page)).returncode == 0
    assert page.read_text() == text
