"""A SparkSession configured for Tidemark jobs, the same for the CLI, spark-submit and tests."""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from pyspark.errors import PySparkRuntimeError
from pyspark.sql import SparkSession

from tidemark.errors import FailedPreconditionError
from tidemark.jobs.job_options import DEFAULT_MASTER

_FORWARDED_ENV_PREFIXES = ("AWS_", "TIDEMARK_")
_NEVER_FORWARDED = frozenset({"TIDEMARK_CLIENT_TOKEN"})
"""A token value as ``spark.executorEnv`` would show on the UI's environment page and in
the event log; executors read ``TIDEMARK_CLIENT_TOKEN_FILE`` (a path) instead, or the
token travels inside the pickled client config of a task, never in the Spark conf."""
QUIET_WORKER_MODULE = "pyspark_tidemark_worker"
"""PySpark's worker, ending quietly when its task's JVM side hung up (a cancelled task)."""
_TASK_FAILURE_LOGGERS = (
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager",
)
"""They print a failed task's whole trace; the failure reaches the driver's action anyway,
where ``spark_jobs.errors.run_spark_action`` logs it at debug level and raises one error."""


def build_session(
    master: str | None = DEFAULT_MASTER,
    *,
    app_name: str = "tidemark",
    shuffle_partitions: int | None = None,
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Get or create the session; ``master=None`` keeps what spark-submit configured.

    Arrow is on (executors exchange Arrow batches with the JVM), times are UTC (Hudi stores
    timestamps in UTC) and the storage settings of the driver (``AWS_*``, ``TIDEMARK_*``)
    are forwarded to executors so they reopen the same storage by URI. Python workers
    talk to their JVM over Unix domain sockets (SPARK-51688): over loopback TCP each
    Python task waited for its input about 30 ms longer (a one-task job took 75 ms
    instead of 44 ms here; py-spy showed the worker blocked reading the partition).
    A local master's workers run this Python, which has ``QUIET_WORKER_MODULE``; a
    cluster's executors keep PySpark's worker (one they cannot import crashes every
    task without a word, where ``check_executors_import`` names the missing tidemark).
    """
    if master is not None and master.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the JVM's own workers too
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    partitions = shuffle_partitions or 2 * (os.cpu_count() or 1)
    settings = {
        "spark.sql.shuffle.partitions": str(partitions),
        "spark.default.parallelism": str(partitions),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.python.unix.domain.socket.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.extraJavaOptions": "-Dlog4j2.rootLogger.level=warn",
    }
    if master is not None and master.startswith("local"):
        settings["spark.python.worker.module"] = QUIET_WORKER_MODULE
    for name, value in os.environ.items():
        if name.startswith(_FORWARDED_ENV_PREFIXES) and name not in _NEVER_FORWARDED:
            settings[f"spark.executorEnv.{name}"] = value
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    if SparkSession.getActiveSession() is None:
        require_java()
    try:
        session = builder.getOrCreate()
    except PySparkRuntimeError as error:
        raise FailedPreconditionError(
            f"Spark did not start: {str(error).splitlines()[0]}", field="spark"
        ) from None
    use_driver_python(session)
    session.sparkContext.setLogLevel("ERROR")
    log4j = session.sparkContext._jvm.org.apache.logging.log4j  # type: ignore[union-attr]
    for name in _TASK_FAILURE_LOGGERS:
        log4j.core.config.Configurator.setLevel(name, log4j.Level.OFF)
    return session


def use_driver_python(spark: SparkSession) -> None:
    """Run a local master's Python workers on this interpreter, unless ``PYSPARK_PYTHON``
    or ``spark.pyspark.python`` names one: PySpark otherwise starts ``python3`` from PATH,
    which lacks tidemark when the job runs a virtualenv's Python without activating it.
    Python functions take their interpreter from the context when they are built, so
    this holds for the jobs started after it."""
    context = spark.sparkContext
    chosen = "PYSPARK_PYTHON" in os.environ or context.getConf().contains("spark.pyspark.python")
    if str(context.master).startswith("local") and not chosen:
        context.pythonExec = sys.executable


SHIP_ENVIRONMENT = (
    "on a local master, run them on a Python that has it: unset PYSPARK_PYTHON and "
    "spark.pyspark.python to use the driver's ({python}), or point them to one; on a "
    "cluster, ship the environment to them: spark-submit --archives "
    "env.tar.gz#environment with spark.executorEnv.PYSPARK_PYTHON=./environment/bin/python "
    "(a venv-pack archive of this Python's environment; docs/deploy.md)"
)
_executors_checked: set[str] = set()
"""Spark applications whose executors were found to import tidemark."""


def check_executors_import(spark: SparkSession) -> None:
    """Run one tiny task importing tidemark on an executor, once per Spark application,
    before a job touches a table: executors whose Python lacks it (a cluster's workers run
    ``python3`` from their PATH unless told otherwise) would otherwise fail inside the
    write, after its instant was created. A FailedPreconditionError in one line says which
    Python to use (local) or how to ship it (cluster)."""
    use_driver_python(spark)
    context = spark.sparkContext
    if context.applicationId in _executors_checked:
        return
    try:
        context.parallelize([0], 1).map(_tidemark_file).collect()
    except Exception as error:
        if "No module named 'tidemark" not in str(error):
            raise
        raise FailedPreconditionError(
            f"the Spark executors cannot import tidemark with Python {context.pythonExec}: "
            + SHIP_ENVIRONMENT.format(python=sys.executable),
            field="executors",
        ) from None
    _executors_checked.add(context.applicationId)


def _tidemark_file(_: int) -> str:
    """Run on an executor: unpickling this function there imports tidemark."""
    import tidemark

    return str(tidemark.__file__)


def require_java() -> str:
    """The ``java`` Spark will launch (``$JAVA_HOME/bin/java``, else the one on PATH), or one
    line saying what is missing, instead of spark-class's shell errors and a traceback."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        java = str(Path(java_home) / "bin" / "java")
        if not os.access(java, os.X_OK):
            raise FailedPreconditionError(
                f"Spark needs Java 17 or newer: JAVA_HOME={java_home} has no bin/java",
                field="java",
            )
        return java
    found = shutil.which("java")
    if found is None:
        raise FailedPreconditionError(
            "Spark needs Java 17 or newer: no java on PATH and JAVA_HOME is not set",
            field="java",
        )
    return found


TASK_STOP_WAIT_S = 60.0
"""How long leaving ``cancellable_jobs`` waits for cancelled tasks to end (a Python worker
is killed ``spark.python.task.killTimeout``, 2 s, after its task was interrupted)."""


@contextmanager
def cancellable_jobs(spark: SparkSession, tag: str) -> Iterator[Callable[[], None]]:
    """Tag the Spark jobs this thread starts; yields a function that cancels them from any
    thread, interrupting their running tasks (a writer that lost its lock stops writing).
    After a cancel, leaving waits until no task runs any more, so that a process exiting
    next neither leaves tasks writing nor has Spark's shutdown fail them noisily."""
    context = spark.sparkContext
    cancelled = threading.Event()

    def cancel() -> None:
        cancelled.set()
        context.cancelJobsWithTag(tag)

    context.addJobTag(tag)
    context.setInterruptOnCancel(True)
    try:
        yield cancel
    finally:
        context.setInterruptOnCancel(False)
        context.removeJobTag(tag)
        if cancelled.is_set():
            _wait_for_running_tasks(spark)


def _wait_for_running_tasks(spark: SparkSession) -> None:
    tracker = spark.sparkContext.statusTracker()
    deadline = time.monotonic() + TASK_STOP_WAIT_S
    while time.monotonic() < deadline:
        if not any(info.numRunningTasks for info in tracker.getExecutorInfos()):
            return
        time.sleep(0.1)
