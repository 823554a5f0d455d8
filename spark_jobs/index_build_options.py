"""Every option of a record index build as one frozen value, checked when it is made.

``tidemark index build`` (from its flags with ``from_args``), ``tidemark.spark.index_build``
and the demo hand ``build_index`` an ``IndexBuildOptions``, so a bad value is refused
before a lock is taken or Spark starts.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from tidemark.checks import require_positive
from tidemark.index.build import MAX_SHARDS
from tidemark.jobs.checks import require_between
from tidemark.jobs.job_options import DEFAULT_LOCK_LEASE_S
from tidemark.table.leases.storage_lease import DEFAULT_LOCK_WAIT_S, check_lock_wait


@dataclass(frozen=True)
class IndexBuildOptions:
    """How to build a record index; every field has the CLI's default."""

    shards: int | None = None
    """Shard count, 1 to ``MAX_SHARDS``; None sizes it from the record count as Hudi does."""
    rebuild: bool = False
    """Delete the table's record index under the table lock and build it again."""
    lock_wait_s: float = DEFAULT_LOCK_WAIT_S
    """How long to wait for the table lock and the build lease (0: fail at once)."""
    lock_lease_s: float = DEFAULT_LOCK_LEASE_S
    """Lease of the table lock and of the build's own lease."""

    def __post_init__(self) -> None:
        if self.shards is not None:
            require_between("shards", self.shards, 1, MAX_SHARDS)
        check_lock_wait(self.lock_wait_s)
        require_positive("lock_lease_s", self.lock_lease_s)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> IndexBuildOptions:
        """The options ``tidemark index build`` parsed."""
        return cls(
            shards=args.shards,
            rebuild=args.rebuild,
            lock_wait_s=args.lock_wait_s,
            lock_lease_s=args.lock_lease_s,
        )


DEFAULT_BUILD_OPTIONS = IndexBuildOptions()
