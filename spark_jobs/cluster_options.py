"""Every option of a clustering run as one frozen value, checked when it is made.

``tidemark cluster run``, ``spark-submit spark_jobs/cluster.py`` (from their flags with
``from_args``), ``tidemark.spark.cluster_run`` and the demo all hand ``run_clustering`` a
``ClusterOptions``, so a bad value is refused before a lock is taken or Spark starts.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

from tidemark.checks import require_positive
from tidemark.config import MIB
from tidemark.errors import InvalidArgumentError
from tidemark.jobs.job_options import JobOptions

DEFAULT_ROW_GROUP_BYTES = 120 * MIB
"""Hudi's ``hoodie.parquet.block.size``: several row groups per clustered file, so a
query's row-group statistics prune inside the files too."""
MIN_SLICE_INPUT_BYTES = 64 * MIB
"""The least input a slice of a group gets: each slice repeats the group's order and reads
of its input files, so a smaller group is faster as one task (``python -m benchmarks
clustering``'s 11 MB group cut in four slices took twice the Python CPU of one task)."""


@dataclass(frozen=True)
class ClusterOptions(JobOptions):
    """How to run clustering plans; every field has the CLI's default (``JobOptions``: the
    markers, service markers as every write, the index service and the table lock)."""

    row_group_bytes: int = DEFAULT_ROW_GROUP_BYTES
    """Parquet row group size of the clustered files (``--row-group-mb``)."""
    min_slice_bytes: int = MIN_SLICE_INPUT_BYTES
    """A group is cut across tasks only into slices of at least this much input
    (``--min-slice-mb``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("row_group_bytes", "min_slice_bytes"):
            require_positive(name, getattr(self, name))

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ClusterOptions:
        """The options ``spark_jobs.cluster.add_arguments`` parsed."""
        return cls(
            **cls.job_fields(args),
            row_group_bytes=_bytes(args.row_group_mb, "row_group_mb"),
            min_slice_bytes=_bytes(args.min_slice_mb, "min_slice_mb"),
        )


def _bytes(mib: float, field: str) -> int:
    """A size given in MiB (fractions allowed) as bytes."""
    if not math.isfinite(mib):
        raise InvalidArgumentError(f"must be a number, got {mib}", field=field)
    return math.ceil(mib * MIB)


DEFAULT_CLUSTER_OPTIONS = ClusterOptions()
