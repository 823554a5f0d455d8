"""docs/python-api.md runs as written: its ``python`` blocks, in order, in one namespace
holding the user's ``spark`` session and ``table_path`` (an indexed table)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark.indexkit import indexed_table

DOC = Path(__file__).parents[2] / "docs" / "python-api.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.DOTALL | re.MULTILINE)


def test_python_api_examples_run_as_written(
    spark: SparkSession, table_uri: str, capsys: pytest.CaptureFixture[str]
) -> None:
    located = indexed_table(spark, table_uri)
    blocks = python_blocks(DOC.read_text())
    assert len(blocks) >= 4
    namespace: dict[str, object] = {"spark": spark, "table_path": table_uri}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)
    logged = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ")  # structlog's lines
    printed = "".join(
        line for line in capsys.readouterr().out.splitlines(keepends=True) if not logged.match(line)
    )
    holders = {located[k][1] for k in ("1", "4", "6")}
    looked_up = {located[k][1] for k in ("3", "7")}
    assert "table: not a Hudi table" in printed
    lookups = f"[3, 7]\n['id', 'name']\n{len(looked_up)}\n"
    assert f"3 4 3\n{len(holders)}\n{lookups}4\n12 1 12\n" in printed
    assert "_hoodie_commit_time" in printed
    assert "written 20 5 7\ntagged by record record\n" in printed
    assert "clustered True 2\n" in printed
    assert "cleaned True 0 []\n" in printed
    assert "streamed [(1, 1, False), (0, 0, True)]\n" in printed
