"""Running ``tidemark`` in-process as a user would, and looking at a table byte by byte."""

from __future__ import annotations

import csv
import io
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from tidemark.cli import main
from tidemark.storage import open_storage

Row = dict[str, Any]


class Cli:
    """``tidemark`` in-process: inputs written as JSON Lines or CSV (Python's ``csv``
    module, RFC 4180), stderr captured at the fd (so JVM output would show too)."""

    def __init__(self, folder: Path, capfd: pytest.CaptureFixture[str]) -> None:
        self.folder = folder
        self.capfd = capfd

    def write(
        self, table: str, rows: list[Row], *options: str, fmt: str = "jsonl"
    ) -> tuple[int, str]:
        text = _csv(rows) if fmt == "csv" else "".join(json.dumps(r) + "\n" for r in rows)
        return self.write_text(table, text, *options, fmt=fmt)

    def write_text(
        self, table: str, text: str, *options: str, fmt: str = "jsonl"
    ) -> tuple[int, str]:
        """``tidemark write`` of an input file holding ``text`` exactly."""
        source = self.folder / f"in-{uuid.uuid4().hex[:8]}.{fmt}"
        source.write_text(text)
        return self.write_file(table, source, *options)

    def write_file(self, table: str, source: Path, *options: str) -> tuple[int, str]:
        return self.run(
            "write",
            "--table",
            table,
            "--input",
            str(source),
            "--markers",
            "direct",
            "--master",
            "local[2]",
            *options,
        )

    def run(self, *argv: str) -> tuple[int, str]:
        """Exit code and stderr."""
        self.capfd.readouterr()
        code = main(list(argv))
        return code, self.capfd.readouterr().err

    def output(self, *argv: str) -> tuple[int, str]:
        """Exit code and stdout."""
        self.capfd.readouterr()
        code = main(list(argv))
        return code, self.capfd.readouterr().out


def _csv(rows: list[Row]) -> str:
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return text.getvalue()


def refused_in_one_line(code: int, err: str, command: str = "write") -> str:
    """The error line (its text after the prefix); nothing else looks like a failure."""
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[-1].startswith(f"tidemark {command}: error: "), err
    assert not any(word in err for word in ("Traceback", "ERROR", "Exception")), err
    return lines[-1].removeprefix(f"tidemark {command}: error: ")


def table_state(uri: str) -> dict[str, bytes]:
    """Every object (and, locally, every folder) under the table, with contents."""
    if uri.startswith("s3://"):
        storage = open_storage(uri)
        return {info.path: storage.read(info.path) for info in storage.list("")}
    root = Path(uri)
    return {
        str(path.relative_to(root)): path.read_bytes() if path.is_file() else b"<dir>"
        for path in root.rglob("*")
    }
