"""A write whose Spark executors cannot import tidemark (their Python lacks it) is refused
before it touches the table, in one line saying how to ship the environment. The
executors here get a ``tidemark`` that fails to import first on their PYTHONPATH (Spark
puts ``spark.executorEnv.PYTHONPATH`` ahead of its own), in a Spark of their own (one
SparkContext per process)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = """
import sys
from tidemark.errors import FailedPreconditionError
from tidemark.jobs.session import build_session
from tidemark.jobs.write import write
from tidemark.jobs.write_options import WriteOptions

spark = build_session("local[1]", conf={"spark.executorEnv.PYTHONPATH": sys.argv[1]})
rows = spark.createDataFrame([("a", 1)], "id string, v int")
try:
    write(spark, rows, sys.argv[2], "insert", WriteOptions(record_key_fields=["id"]))
except FailedPreconditionError as error:
    print(error)
"""


def test_executors_without_tidemark_are_found_before_the_table_is_touched(
    tmp_path: Path,
) -> None:
    shadow = tmp_path / "shadow" / "tidemark"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'tidemark'\")\n"
    )
    table = tmp_path / "t"
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SCRIPT), str(shadow.parent), str(table)],
        cwd=tmp_path,  # a worker's path starts with its working directory: not a checkout's
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    refusals = [  # among the embedded marker service's log lines
        line
        for line in done.stdout.splitlines()
        if line.startswith("executors: the Spark executors cannot import tidemark: ship")
    ]
    assert len(refusals) == 1, done.stdout[-3000:]
    [line] = refusals
    assert "--archives env.tar.gz#environment" in line
    assert not table.exists()  # no table, no instant
