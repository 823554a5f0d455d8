"""Shared fixtures (the real moto S3 server process, fresh buckets, local roots, the
SparkSession) and the test tiers: marks ``spark``, ``s3`` and ``slow`` set at collection, so
``make test-fast`` (``-m "not spark and not s3 and not slow"``) can leave them out."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from jvm_archive import class_archive

from tidemark.errors import FailedPreconditionError
from tidemark.storage.s3 import s3_client
from tidemark.testing.s3local import FaultProxy, LocalS3Server

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytest_plugins = ["pytester"]  # tests/test_tiers.py runs the collection hook on its own files

TEST_JVM_OPTIONS = (
    "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    " -Dspark.sql.codegen.wholeStage=false -Dspark.sql.codegen.factoryMode=NO_CODEGEN"
)
"""JVM flags of every Spark driver the suite starts, its shared sessions and the
``tidemark`` processes tests start (they inherit the environment; spark-submit reads
``SPARK_SUBMIT_OPTS``): on tiny data the optimising compiler and the parallel GC threads
cost more CPU than they save, and the suite is CPU-bound (two cores, three workers).
Measured on an idle machine, in-process Spark files (CPU seconds from /proc/stat, wall):
test_native_read + test_schema_promotion 123 s / 84 s with the flags against 154 s / 91 s
without; test_write_validation + test_input_formats 97 s / 80 s against 138-150 s /
87-96 s; a ``tidemark`` child: tests/spark/test_concurrency.py 295 s instead of 518 s.
The ``spark.sql.codegen`` properties (every driver reads ``spark.*`` system properties
into its conf) evaluate expressions interpreted, the mode Spark's own tests run beside
codegen: generating and compiling Java for each query (Janino, then C1, its classes swept
later) costs more than a few rows gain. test_write_operations + test_write_validation,
the session's JVM: 62.9 -> 57.6 CPU-s (2026-11-30, JFR: Janino and class lookups were a
tenth of its sampled time). Jobs outside the suite keep the JVM's and Spark's defaults."""
os.environ.setdefault("SPARK_SUBMIT_OPTS", TEST_JVM_OPTIONS)


@pytest.fixture(scope="session", autouse=True)
def jvm_class_archive(request: pytest.FixtureRequest) -> Iterator[str]:
    """The flags mapping the class archive of tests/jvm_archive.py into every driver the
    suite starts (added to ``SPARK_SUBMIT_OPTS``), or "" when the run selects no Spark test,
    ``SPARK_SUBMIT_OPTS`` was set outside, or no archive can be made. A JVM on other jars
    (a test's own virtualenv) runs without the archive; its CDS log is off, or it would say
    so on stdout, which tests parse."""
    ours = os.environ.get("SPARK_SUBMIT_OPTS") == TEST_JVM_OPTIONS
    tiers = ("spark", "slow")
    wanted = any(item.get_closest_marker(tier) for item in request.session.items for tier in tiers)
    archive = class_archive(TEST_JVM_OPTIONS) if ours and wanted else None
    if archive is None:
        yield ""
        return
    flags = f"-XX:SharedArchiveFile={archive} -Xlog:cds*=off"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPARK_SUBMIT_OPTS", f"{TEST_JVM_OPTIONS} {flags}")
        yield flags


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """Endpoint URL of a moto server started once per session.

    The standard AWS variables point boto3 (and so every S3Storage, also in
    subprocesses) at it for the whole session.
    """
    with LocalS3Server() as server, pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_ENDPOINT_URL", server.endpoint)
        patch.setenv("AWS_ACCESS_KEY_ID", "tidemark-test")
        patch.setenv("AWS_SECRET_ACCESS_KEY", "tidemark-test")
        patch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        patch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
        patch.delenv("AWS_PROFILE", raising=False)
        yield server.endpoint


@pytest.fixture
def faulty_s3(s3_server: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    """A FaultProxy in front of moto; storages opened in the test (and processes it
    starts) go through it."""
    with FaultProxy(s3_server) as fault_proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", fault_proxy.endpoint)
        yield fault_proxy


@pytest.fixture
def s3_bucket(s3_server: str, request: pytest.FixtureRequest) -> str:
    """``s3://<fresh bucket>/table``: an empty S3 root for one test."""
    if request.node.get_closest_marker("s3") is None:
        pytest.fail(
            f"{request.node.nodeid} asks for s3_bucket at run time: mark it s3 "
            '(pytest.param("s3", marks=pytest.mark.s3)) so the fast tier leaves it out'
        )
    bucket = f"tm-{uuid.uuid4().hex[:16]}"
    s3_client().create_bucket(Bucket=bucket)
    return f"s3://{bucket}/table"


@pytest.fixture
def local_root(tmp_path: Path) -> str:
    """Path of a fresh, empty local directory to use as a storage root."""
    root = tmp_path / "root"
    root.mkdir()
    return str(root)


@pytest.fixture(scope="session")
def spark(s3_server: str, jvm_class_archive: str) -> Iterator[SparkSession]:
    """One local SparkSession for all Spark tests (started after the S3 server so executors
    inherit its AWS_* settings); ``local[2,4]`` = two cores, four attempts per task; its JVM
    runs with ``TEST_JVM_OPTIONS`` and the class archive, as every driver of the suite.
    pyspark is imported here, not at the top, so tests without Spark never load it."""
    from tidemark.jobs.session import build_session

    try:
        session = build_session("local[2,4]", app_name="tidemark-tests", shuffle_partitions=4)
    except FailedPreconditionError as error:
        # Once in the whole suite's runs (2026-11-29) a worker's first JVM exited before
        # handing its port, cause not found, and every Spark test of that worker errored.
        print(f"starting the suite's Spark session again: {error}", file=sys.stderr)
        session = build_session("local[2,4]", app_name="tidemark-tests", shuffle_partitions=4)
    master = session.sparkContext.master
    assert master == "local[2,4]", f"another test left a {master} session (no task retries)"
    yield session
    session.stop()


TESTS = Path(__file__).parent
SPARK_FOLDERS = (TESTS / "spark",)
"""Every test under these folders runs Spark, in this process or in a ``tidemark`` child."""
SLOW = frozenset(
    {
        "test_packaging.py",
        "helm/test_chart_run.py",
        "helm/test_chart_dns.py",
        "hardening/test_bench_load.py",
        "hardening/test_edge_memory.py",
        "spark/test_executor_environment.py",
        "spark/test_user_job.py",
        "hardening/test_fuzz_index.py",
        "hardening/test_fuzz_marker.py",
        "hardening/test_fuzz_planner.py",
        "hardening/test_service_faults.py::test_index_service_killed_during_its_compaction",
        "index/test_index_scale_bench.py",
        "table/test_archive_bounded.py::test_many_writes_keep_the_metadata_folder_bounded",
        "index/test_index_cli.py::test_errors_are_one_line_and_exit_2",
        "index/test_index_compaction.py::test_compaction_killed_mid_way_leaves_exact_lookups",
        "index/test_index_compaction.py::test_background_compaction_keeps_deltas_per_shard_bounded",
        "marker/test_marker_bench.py::test_bench_markers_reports_both_mechanisms",
        "marker/test_marker_small_files_bench.py::test_bench_small_files_compares_direct_and_service_markers",
        "replicas/test_index_replicas.py::test_two_replicas_compacting_one_table_fold_each_delta_once",
        "replicas/test_index_replicas.py::test_changes_staged_while_a_replica_is_down_are_seen_through_every_replica",
        "replicas/test_index_replicas.py::test_a_replica_killed_mid_stream_loses_no_answer_and_serves_again_once_back",
    }
)
"""Tests that take over ~10 s on an idle 2-core machine (``--durations``): fresh venvs, helm
releases, fuzzing, load and scale runs, benchmarks, replicas and compactions killed and
restarted, CLI runs by the dozen; by file, or by ``file::test`` (relative to tests/)."""


LONGEST_FIRST = (
    "test_packaging.py",
    "spark/test_stream_mor_compaction.py",
    "spark/test_cluster_run.py",
    "test_demo.py",
    "spark/test_stream_writer.py",
    "faults/test_fencing.py",
    "spark/test_concurrency.py",
)
"""Files that take the longest (``--durations``, 2026-11-29: 340, 154, 457, 242, 314 s...),
collected first: ``--dist loadfile`` hands whole files to workers in collection order, and
one of these met last kept a single worker busy for minutes after the others were done."""


def _longest_first(item: pytest.Item) -> int:
    file = item.path.relative_to(TESTS).as_posix()
    return LONGEST_FIRST.index(file) if file in LONGEST_FIRST else len(LONGEST_FIRST)


def _tiers(item: pytest.Item) -> set[str]:
    """The tier marks of one test: ``spark`` when it is in a Spark folder or needs the
    session (also through another fixture), ``s3`` when it needs the moto server (Spark tests
    do: the session starts after it), ``slow`` when SLOW names it."""
    needs = set(getattr(item, "fixturenames", ()))
    marks = set()
    if "spark" in needs or any(folder in item.path.parents for folder in SPARK_FOLDERS):
        marks.add("spark")
    if "s3_server" in needs:
        marks.add("s3")
    if _slow_names(item) & SLOW:
        marks.add("slow")
    return marks


def _slow_names(item: pytest.Item) -> set[str]:
    """The names SLOW may list ``item`` by: its file, and file::test without parameters."""
    file = item.path.relative_to(TESTS).as_posix()
    return {file, f"{file}::{getattr(item, 'originalname', item.name)}"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test with its tiers (a SLOW name that matches no test of a collected file
    is an error, so a renamed test cannot drop out of the slow tier unnoticed) and put the
    ``LONGEST_FIRST`` files first, each file's tests in their order."""
    collected: set[str] = set()
    for item in items:
        names = _slow_names(item)
        collected |= names
        for mark in sorted(_tiers(item)):
            item.add_marker(mark)
    files = {name.partition("::")[0] for name in collected}
    stale = {name for name in SLOW if name.partition("::")[0] in files} - collected
    if stale:
        raise pytest.UsageError(f"SLOW in tests/conftest.py names no test: {sorted(stale)}")
    items.sort(key=_longest_first)
