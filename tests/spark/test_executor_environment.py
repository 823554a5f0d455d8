"""A write, a clustering run and an index build whose Spark executors cannot import
tidemark (their Python lacks it) are refused before they touch the table, each in one line
naming their Python and saying what to do on a local master and on a cluster. The
executors here get a ``tidemark`` that fails to import first on their PYTHONPATH (Spark
puts ``spark.executorEnv.PYTHONPATH`` ahead of its own), in a Spark of their own (one
SparkContext per process, so the three jobs share one subprocess)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from planner.plankit import new_table

import tidemark.spark

SCRIPT = """
import sys
import tidemark.spark
from tidemark.errors import FailedPreconditionError
from tidemark.jobs.session import build_session
from tidemark.jobs.write_options import WriteOptions

shadow, new_table, table = sys.argv[1:]
spark = build_session("local[1]", conf={"spark.executorEnv.PYTHONPATH": shadow})
rows = spark.createDataFrame([("a", 1)], "id string, v int")
jobs = {
    "write": lambda: tidemark.spark.write(
        rows, new_table, "insert", options=WriteOptions(record_key_fields=["id"])
    ),
    "cluster run": lambda: tidemark.spark.cluster_run(spark, table),
    "index build": lambda: tidemark.spark.index_build(spark, table),
}
for name, job in jobs.items():
    try:
        job()
    except FailedPreconditionError as error:
        print(f"{name} refused: {error}")
"""


def files_of(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_executors_without_tidemark_are_found_before_the_table_is_touched(
    tmp_path: Path,
) -> None:
    shadow = tmp_path / "shadow" / "tidemark"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'tidemark'\")\n"
    )
    table = new_table(tmp_path, {"eu": [5, 5]})  # two small files: a plan to run
    assert tidemark.spark.cluster_schedule(table.uri) is not None
    before = files_of(Path(table.uri))
    new = tmp_path / "t"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(SCRIPT),
            str(shadow.parent),
            str(new),
            table.uri,
        ],
        cwd=tmp_path,  # a worker's path starts with its working directory: not a checkout's
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    refusals = [line for line in done.stdout.splitlines() if " refused: " in line]
    ship = f"executors: the Spark executors cannot import tidemark with Python {sys.executable}"
    assert [line.split(" refused: ")[0] for line in refusals] == [
        "write",
        "cluster run",
        "index build",
    ], done.stdout[-3000:]
    for line in refusals:
        assert line.split(" refused: ")[1].startswith(ship)
        assert "on a local master, run them on a Python that has it: unset PYSPARK_PYTHON" in line
        assert "on a cluster, ship the environment to them: spark-submit --archives" in line
        assert "--archives env.tar.gz#environment" in line
    assert not new.exists()  # no table, no instant
    assert files_of(Path(table.uri)) == before  # the plan still requested, no index, no lease
