"""Writers vs pending clustering plans (Hudi's update strategies for clustering).

A pending plan will rewrite its file groups; an update, delete or insert_overwrite of one
of them would be lost when the plan completes. By default such a write is refused with
Hudi's message (``SparkRejectUpdateStrategy``) naming the plan's instant; with
``--on-pending-clustering rollback`` the plans it touches are rolled back first (as
Hudi's rollback of a pending replacecommit) and the write goes on, unless a runner is
executing one of them (its run lease is live: the write is refused). Inserts never top up a
small file in a pending plan (Hudi's small-file handling skips them too), so inserts
always proceed, into other file groups. Run under the writer's table lock.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import structlog

from tidemark.errors import FailedPreconditionError
from tidemark.table.clustering_plan import file_groups_in, pending_plans
from tidemark.table.commit import rollback
from tidemark.table.fsview import BaseFile
from tidemark.table.markers import StorageMarkerReader
from tidemark.table.plan_run import check_not_running, forget_runs
from tidemark.table.table import HoodieTable

log = structlog.get_logger(__name__)

REJECT = "reject"
ROLLBACK = "rollback"
POLICIES = (REJECT, ROLLBACK)


def add_argument(parser: argparse.ArgumentParser) -> None:
    """``--on-pending-clustering`` of the write job."""
    parser.add_argument(
        "--on-pending-clustering",
        choices=POLICIES,
        default=REJECT,
        help="an update, delete or insert_overwrite of a file group in a pending clustering "
        "plan is refused (reject, default) or rolls the plan back first (rollback)",
    )


@dataclass(frozen=True)
class PendingClustering:
    """The file groups of a table's pending plans, read under the writer's lock."""

    table: HoodieTable
    planned: dict[tuple[str, str], str]
    """(partition path, file id) -> the pending plan's instant."""

    @classmethod
    def load(cls, table: HoodieTable) -> PendingClustering:
        return cls(table, file_groups_in(pending_plans(table)))

    def small_files(self, files: Sequence[BaseFile]) -> list[BaseFile]:
        """``files`` without those in a pending plan: inserts never top them up."""
        return [f for f in files if (f.partition_path, f.file_id) not in self.planned]

    def resolve(self, touched: Iterable[tuple[str, str]], policy: str) -> list[str]:
        """Refuse (``reject``) or roll back (``rollback``) the plans holding a file group
        the write updates, deletes from or replaces; returns the plans rolled back."""
        hits = sorted({key: self.planned[key] for key in touched if key in self.planned}.items())
        if not hits:
            return []
        if policy != ROLLBACK:
            (partition, file_id), instant = hits[0]
            raise FailedPreconditionError(
                f"Not allowed to update the clustering file group {file_id} (partition "
                f"{partition!r}) of pending clustering plan {instant}. For pending clustering "
                "operations, we are not going to support update for now; "
                "--on-pending-clustering rollback rolls the plan back first",
                field="clustering",
            )
        instants = sorted({instant for _, instant in hits})
        markers = StorageMarkerReader(self.table.storage)
        for instant in instants:
            check_not_running(self.table.storage, instant)
        for instant in instants:
            rollback(self.table, instant, markers)
            forget_runs(self.table.storage, instant)
            log.warning("write.pending_clustering_rolled_back", table=self.table.uri, plan=instant)
        return instants
