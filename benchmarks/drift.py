"""What a long stream must keep flat, sampled once per batch: the driver's and the JVM's
resident memory; what each holds on to, which resident memory alone does not tell apart
from an allocator keeping freed memory: the driver's Python objects (memory blocks in use
after a full collection, ``sys.getallocatedblocks``) and Arrow buffers
(``pyarrow.total_allocated_bytes``), the JVM's heap in use after a full collection (its
resident memory also grows while the heap expands towards its maximum); and the longest
command the driver sent to the JVM (every string handed to Spark goes through one: a
DataFrame option, a job tag, a plan); and the seconds of each stage of the batch, to say
which one a slower batch spends. Reported as the medians of the first and the last tenth
of the batches, and their ratio. Samples are kept in arrays of doubles, not lists of Python
floats, so the sampling adds no Python objects to the count it samples (kept in lists,
it added 15-20 blocks a batch)."""

from __future__ import annotations

import gc
import statistics
import sys
from array import array
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession

SAMPLES = (
    "driver_rss_mib",
    "python_blocks",
    "arrow_mib",
    "jvm_rss_mib",
    "jvm_heap_mib",
    "longest_command_chars",
    "batch_s",
)
STAGE_PREFIX = "stage: "


def resident_mib(pid: int | str = "self") -> float:
    """VmRSS of a process (Linux ``/proc``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


class Drift:
    """Per-batch samples; ``watch(spark)`` starts counting the commands sent to its JVM."""

    def __init__(self, spark: SparkSession) -> None:
        self.samples: dict[str, array[float]] = {name: array("d") for name in SAMPLES}
        self._longest = 0
        self._jvm = spark._jvm
        self._jvm_pid = int(self._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[union-attr]
        client = spark.sparkContext._gateway._gateway_client  # type: ignore[union-attr]
        send: Callable[..., Any] = client.send_command

        def measured(command: str, *args: Any, **kwargs: Any) -> Any:
            self._longest = max(self._longest, len(command))
            return send(command, *args, **kwargs)

        client.send_command = measured

    def batch_done(self, seconds: float, stages: Mapping[str, float] | None = None) -> None:
        """Sample after a batch: memory now, the longest command since the last sample, and
        the batch's ``stages`` (a write's ``stage_seconds``; a stage it did not run counts 0
        s), which tell which part of a batch's time grows."""
        measured = {
            "driver_rss_mib": resident_mib(),
            "python_blocks": _python_blocks_after_gc(),
            "arrow_mib": pa.total_allocated_bytes() / (1024 * 1024),
            "jvm_rss_mib": resident_mib(self._jvm_pid),
            "jvm_heap_mib": self._heap_after_gc_mib(),
            "longest_command_chars": self._longest,
            "batch_s": seconds,
        }
        self._longest = 0
        self.keep(measured, stages or {})

    def keep(self, measured: Mapping[str, float], stages: Mapping[str, float]) -> None:
        """Append one batch's ``measured`` values (one for each of ``SAMPLES``) and its
        ``stages`` to the arrays, which hold no Python object a value."""
        done = len(self.samples["batch_s"])
        for stage in stages:
            self.samples.setdefault(f"{STAGE_PREFIX}{stage}", array("d", [0.0] * done))
        for name, values in self.samples.items():
            if name.startswith(STAGE_PREFIX):
                values.append(stages.get(name.removeprefix(STAGE_PREFIX), 0.0))
            else:
                values.append(measured[name])

    def _heap_after_gc_mib(self) -> float:
        """The JVM's heap in use right after ``System.gc()`` (outside the batch's timing)."""
        jvm: Any = self._jvm
        jvm.java.lang.System.gc()
        memory = jvm.java.lang.management.ManagementFactory.getMemoryMXBean()
        return int(memory.getHeapMemoryUsage().getUsed()) / (1024 * 1024)

    def last(self) -> str:
        """The last batch's samples, for a progress line."""
        return ", ".join(f"{name} {self.samples[name][-1]:,.2f}" for name in SAMPLES)

    def stage_medians(self) -> dict[str, float]:
        """The median seconds of each stage over every batch."""
        return {
            name.removeprefix(STAGE_PREFIX): round(statistics.median(values), 3)
            for name, values in self.samples.items()
            if name.startswith(STAGE_PREFIX)
        }

    def report(self) -> dict[str, Any]:
        """Each sample's first- and last-tenth medians and last/first ratio."""
        result: dict[str, Any] = {}
        for name, values in self.samples.items():
            tenth = max(1, len(values) // 10)
            first, last = statistics.median(values[:tenth]), statistics.median(values[-tenth:])
            result[name] = {
                "first_tenth": round(first, 3),
                "last_tenth": round(last, 3),
                "ratio": round(last / first, 3) if first else None,
            }
        return result


def _python_blocks_after_gc() -> int:
    """The driver's Python memory blocks in use right after a full collection, as the JVM's
    heap is sampled: objects held, not cyclic garbage waiting for Python's rare collections
    of its oldest generation."""
    gc.collect()
    return sys.getallocatedblocks()


def format_drift(drift: dict[str, Any]) -> list[str]:
    lines = [f"{'per batch':24} {'first tenth':>12} {'last tenth':>12} {'last/first':>10}"]
    for name, figures in drift.items():
        ratio = "-" if figures["ratio"] is None else f"{figures['ratio']:.2f}x"
        lines.append(
            f"{name:24} {figures['first_tenth']:>12,.3f} {figures['last_tenth']:>12,.3f} "
            f"{ratio:>10}"
        )
    return lines
