"""A class-data-sharing archive of the JVM classes a Spark driver loads, for the suite's
JVMs (``-XX:SharedArchiveFile``): a driver then maps some 13,000 classes of Spark, Parquet
and Arrow from one file instead of loading and verifying each from its jar. A one-row
session started, queried and stopped: 6.6 s instead of 11.8 s (median of five pairs,
farm-bench --vs, 2 cores). Made once per machine, JDK and PySpark (about 30 s), by a
driver that runs the kinds of work the suite's jobs do and dumps at exit
(``-XX:ArchiveClassesAtExit``, JDK 13+)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

WORKLOAD = """
import sys
import pyarrow as pa
from pyspark.sql import functions as sf
from tidemark.jobs.session import build_session

out = sys.argv[1]
spark = build_session("local[2]")
frame = spark.createDataFrame([(i, str(i % 3)) for i in range(100)], "id long, part string")
same = frame.mapInArrow(lambda batches: batches, frame.schema)
same.groupBy("part").count().collect()
same.write.partitionBy("part").parquet(out)
read = spark.read.parquet(out)
read.where(sf.col("id").isin(1, 2)).toArrow()
spark.createDataFrame(pa.table({"id": [1, 2]})).join(read, "id").collect()
spark.stop()
"""
"""What the archive's classes are chosen by: Arrow exchange both ways, a shuffle, a Parquet
write and a filtered Parquet read, a join."""


def class_archive(jvm_options: str) -> Path | None:
    """The archive for JVMs run with ``jvm_options`` (made if missing, one process at a
    time), or None where there is no Java or it cannot make one: the suite then runs
    without it, as before."""
    java = _java()
    if java is None:
        return None
    archive = Path(tempfile.gettempdir()) / f"tidemark-tests-{_key(java, jvm_options)}.jsa"
    with open(f"{archive}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not archive.exists():
            _dump(archive, jvm_options)
    return archive if archive.exists() else None


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else shutil.which("java")
    return str(Path(found).resolve()) if found and Path(found).exists() else None


def _key(java: str, jvm_options: str) -> str:
    """Changes with the JDK, the jars on the driver's class path and the flags: an archive
    made for other jars is refused by the JVM, one made for other flags may be."""
    import pyspark

    jars = sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar"))
    listing = [java, jvm_options, *(f"{jar.name}:{jar.stat().st_size}" for jar in jars)]
    return hashlib.sha256("\n".join(listing).encode()).hexdigest()[:16]


def _dump(archive: Path, jvm_options: str) -> None:
    """Runs the workload with the archive dumped at its JVM's exit to a private name,
    renamed once whole: the JVM dies of a truncated archive."""
    partial = archive.with_suffix(f".{os.getpid()}.partial")
    with tempfile.TemporaryDirectory() as scratch:
        env = {
            **os.environ,
            "SPARK_SUBMIT_OPTS": f"{jvm_options} -XX:ArchiveClassesAtExit={partial}",
        }
        done = subprocess.run(
            [sys.executable, "-c", WORKLOAD, str(Path(scratch) / "out")],
            env=env,
            capture_output=True,
            timeout=600,
            check=False,
        )
    if done.returncode == 0 and partial.exists():
        partial.replace(archive)
    else:
        partial.unlink(missing_ok=True)
