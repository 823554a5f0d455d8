"""Every option of a clustering run as one frozen value, checked when it is made.

``tidemark cluster run``, ``spark-submit spark_jobs/cluster.py`` (from their flags with
``from_args``), ``tidemark.spark.cluster_run`` and the demo all hand ``run_clustering`` a
``ClusterOptions``, so a bad value is refused before a lock is taken or Spark starts.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, replace

from tidemark.checks import require_positive
from tidemark.config import MIB
from tidemark.errors import InvalidArgumentError
from tidemark.jobs.checks import require_one_of
from tidemark.jobs.job_options import DEFAULT_LOCK_LEASE_S, MarkerKind, MarkerOptions
from tidemark.table.leases.storage_lease import DEFAULT_LOCK_WAIT_S, check_lock_wait

DEFAULT_ROW_GROUP_BYTES = 120 * MIB
"""Hudi's ``hoodie.parquet.block.size``: several row groups per clustered file, so a
query's row-group statistics prune inside the files too."""
MIN_SLICE_INPUT_BYTES = 64 * MIB
"""The least input a slice of a group gets: each slice repeats the group's order and reads
of its input files, so a smaller group is faster as one task (``python -m benchmarks
clustering``'s 11 MB group cut in four slices took twice the Python CPU of one task)."""


@dataclass(frozen=True)
class ClusterOptions:
    """How to run clustering plans. The markers default to ``direct`` here; the CLI and
    ``tidemark.spark.cluster_run`` use service markers, as every write."""

    markers: MarkerKind = "direct"
    """``service``: markers batched by the marker service; ``direct``: one object per file."""
    marker_service_address: str | None = None
    """``host:port`` of the marker service; needed for service markers once the run starts
    (the CLI and ``tidemark.spark`` start an embedded one when it is None)."""
    marker_fallback_direct: bool = False
    """Write direct markers when the marker service stays unreachable after retries."""
    row_group_bytes: int = DEFAULT_ROW_GROUP_BYTES
    """Parquet row group size of the clustered files (``--row-group-mb``)."""
    lock_lease_s: float = DEFAULT_LOCK_LEASE_S
    """Lease of the table lock and of the plan's run."""
    lock_wait_s: float = DEFAULT_LOCK_WAIT_S
    """How long to wait for the table lock another writer holds (0: fail at once)."""
    index_service_address: str | None = None
    """``host:port`` of the index service, for a table with a record index; None starts an
    embedded one in the driver."""
    min_slice_bytes: int = MIN_SLICE_INPUT_BYTES
    """A group is cut across tasks only into slices of at least this much input."""

    def __post_init__(self) -> None:
        require_one_of("markers", self.markers, ("direct", "service"), "marker kind")
        for name in ("row_group_bytes", "lock_lease_s", "min_slice_bytes"):
            require_positive(name, getattr(self, name))
        check_lock_wait(self.lock_wait_s)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ClusterOptions:
        """The options ``spark_jobs.cluster.add_arguments`` parsed."""
        if not math.isfinite(args.row_group_mb):
            raise InvalidArgumentError(
                f"must be a number, got {args.row_group_mb}", field="row_group_mb"
            )
        return cls(
            markers=args.markers,
            marker_service_address=args.marker_service,
            row_group_bytes=math.ceil(args.row_group_mb * MIB),
            lock_lease_s=args.lock_lease_s,
            lock_wait_s=args.lock_wait_s,
            index_service_address=args.index_service,
        )

    def marker_options(self) -> MarkerOptions:
        """How the run's tasks make markers (service markers need an address by now)."""
        return MarkerOptions(self.markers, self.marker_service_address, self.marker_fallback_direct)

    def with_marker_service(self, address: str | None) -> ClusterOptions:
        return replace(self, marker_service_address=address)


DEFAULT_CLUSTER_OPTIONS = ClusterOptions()
