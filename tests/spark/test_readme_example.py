"""The README's PySpark example runs as written (its table path moved to a temporary
folder), in the suite's shared session, which its ``getOrCreate()`` returns."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark.sparkkit import hudi_rs_table

README = Path(__file__).parents[2] / "README.md"
TABLE_LITERAL = '"/tmp/lake/events"'


def test_readme_python_example_runs_as_written(
    spark: SparkSession, table_uri: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (block,) = re.findall(r"^```python\n(.*?)^```$", README.read_text(), flags=re.S | re.M)
    assert TABLE_LITERAL in block
    code = block.replace(TABLE_LITERAL, repr(table_uri))

    exec(compile(code, str(README), "exec"), {})

    shown = capsys.readouterr().out
    assert re.search(r"\|\s*1\s*\|\s*ann\s*\|", shown), shown
    assert "bob" not in shown  # deleted through the index
    read_by_hudi_rs = hudi_rs_table(table_uri)
    assert read_by_hudi_rs is not None
    assert sorted(read_by_hudi_rs.column("id").to_pylist()) == [1, 3]
    assert (Path(table_uri) / ".hoodie" / ".tidemark" / "record-index").is_dir()
