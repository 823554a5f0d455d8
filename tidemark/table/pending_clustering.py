"""Writers vs pending clustering plans (Hudi's update strategies for clustering).

A pending plan will rewrite its file groups; an update, delete or insert_overwrite of one
of them would be lost when the plan completes. By default such a write is refused with
Hudi's message (``SparkRejectUpdateStrategy``) naming the plan's instant; with
``--on-pending-clustering rollback`` the plans it touches are rolled back first (as
Hudi's rollback of a pending replacecommit) and the write goes on, unless a runner is
executing one of them (its run lease is live: the write is refused). With ``replan``
(the stream writer's default) a plan whose run has not started gives the write its file
groups: it is rolled back and the rest of it saved as a new plan naming it
(``REPLACES_KEY``); a plan being run makes the write wait for its commit
(``PlanRunningError``, raised so the writer can let go of the table lock) and tag its
keys against the new layout. Inserts never top up a small file in a pending plan
(Hudi's small-file handling skips them too), so inserts always proceed, into other file
groups. Run under the writer's table lock.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import structlog

from tidemark.errors import FailedPreconditionError
from tidemark.table.clustering_plan import (
    PendingPlan,
    file_groups_in,
    pending_plans,
    save_plan,
    without_file_groups,
)
from tidemark.table.commit import rollback
from tidemark.table.fsview import BaseFile
from tidemark.table.markers import StorageMarkerReader
from tidemark.table.plan_run import check_not_running, forget_runs, live_run
from tidemark.table.table import HoodieTable

log = structlog.get_logger(__name__)

REJECT = "reject"
ROLLBACK = "rollback"
REPLAN = "replan"
POLICIES = (REJECT, ROLLBACK, REPLAN)


class PlanRunningError(FailedPreconditionError):
    """A ``replan`` write touches the file groups of plan ``instant``, which a live runner
    is executing: the write lets go of the table lock and waits for the run's commit."""

    def __init__(self, instant: str) -> None:
        super().__init__(
            f"clustering plan {instant} is running on file groups this write updates; "
            "the write waits for its commit",
            field="clustering",
        )
        self.instant = instant


def add_argument(parser: argparse.ArgumentParser) -> None:
    """``--on-pending-clustering`` of the write job."""
    parser.add_argument(
        "--on-pending-clustering",
        choices=POLICIES,
        default=REJECT,
        help="an update, delete or insert_overwrite of a file group in a pending clustering "
        "plan is refused (reject, default), rolls the plan back first (rollback), or takes "
        "the file group from the plan, waiting for its commit once its run started (replan)",
    )


@dataclass(frozen=True)
class PendingClustering:
    """The file groups of a table's pending plans, read under the writer's lock."""

    table: HoodieTable
    plans: dict[str, PendingPlan]
    """Instant -> pending plan."""

    @classmethod
    def load(cls, table: HoodieTable) -> PendingClustering:
        return cls(table, {plan.timestamp: plan for plan in pending_plans(table)})

    @property
    def planned(self) -> dict[tuple[str, str], str]:
        """(partition path, file id) -> the pending plan's instant."""
        return file_groups_in(self.plans.values())

    def small_files(self, files: Sequence[BaseFile]) -> list[BaseFile]:
        """``files`` without those in a pending plan: inserts never top them up."""
        return [f for f in files if (f.partition_path, f.file_id) not in self.planned]

    def resolve(self, touched: Iterable[tuple[str, str]], policy: str) -> list[str]:
        """Refuse (``reject``), roll back (``rollback``) or replan (``replan``) the plans
        holding a file group the write updates, deletes from or replaces; returns the
        plans rolled back."""
        planned = self.planned
        hits = sorted({key: planned[key] for key in touched if key in planned}.items())
        if not hits:
            return []
        if policy == REJECT:
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
            if policy == REPLAN and live_run(self.table.storage, instant) is not None:
                raise PlanRunningError(instant)
            check_not_running(self.table.storage, instant)
        for instant in instants:
            rollback(self.table, instant, markers)
            forget_runs(self.table.storage, instant)
            if policy == REPLAN:
                self._replan(instant, [key for key, plan in hits if plan == instant])
            else:
                log.warning(
                    "write.pending_clustering_rolled_back", table=self.table.uri, plan=instant
                )
        return instants

    def _replan(self, instant: str, given_up: list[tuple[str, str]]) -> None:
        """Save what is left of plan ``instant`` (rolled back) as a new plan."""
        rest = without_file_groups(self.plans[instant], given_up)
        replacement = save_plan(self.table, rest).timestamp if rest is not None else None
        log.info(
            "write.pending_clustering_replanned",
            table=self.table.uri,
            plan=instant,
            file_groups_taken=len(given_up),
            replacement=replacement,
        )
