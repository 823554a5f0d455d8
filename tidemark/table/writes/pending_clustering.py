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

A plan given up is not lost without trace: the write records it in its own commit
metadata (``GIVEN_UP_KEY``: the plan, the file groups taken, the plan holding the rest),
so ``cluster run`` of its instant and ``cluster list`` say what happened to it. Giving
plans up lets a stream that touches every file group starve clustering; so once plans
were given up ``PROTECT_AFTER_GIVE_UPS`` times since the table's last clustering, the
planner marks the next one protected (``PROTECTED_KEY``): a ``replan`` write then waits for
its run instead, and gives it up only when no run has started by the end of its
``lock_wait_s`` (a plan nobody runs must not stall the stream again).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import structlog

from tidemark.errors import FailedPreconditionError, NotFoundError
from tidemark.storage.damaged import read_parsed
from tidemark.table import HoodieTable
from tidemark.table.files.view import BaseFile
from tidemark.table.leases.plan_run import check_not_running, forget_runs, live_run
from tidemark.table.metadata.actions import REPLACE_COMMIT, WRITE_ACTIONS
from tidemark.table.plans.clustering import (
    CLUSTER_OPERATION,
    ClusteringPlan,
    PendingPlan,
    file_groups_in,
    pending_plan,
    pending_plans,
    save_plan,
    without_file_groups,
)
from tidemark.table.timeline.instant import State
from tidemark.table.writes.commit import rollback
from tidemark.table.writes.markers import StorageMarkerReader

log = structlog.get_logger(__name__)

REJECT = "reject"
ROLLBACK = "rollback"
REPLAN = "replan"
POLICIES = (REJECT, ROLLBACK, REPLAN)

GIVEN_UP_KEY = "tidemark.clustering.given_up"
"""A write's extraMetadata key: the plans it took file groups from, as
``<plan>:<groups taken>:<replacement plan or ->`` comma-separated."""
PROTECTED_KEY = "tidemark.protected"
"""``clusteringPlan.extraMetadata`` key of a plan ``replan`` writers wait for."""
PROTECT_AFTER_GIVE_UPS = 2
"""Plans given up since the table's last clustering before the next one is protected."""


@dataclass(frozen=True)
class GivenUp:
    """Plan ``plan`` rolled back by a write that took ``file_groups`` of its groups; the
    rest, if any, saved as plan ``replacement``."""

    plan: str
    file_groups: int
    replacement: str | None

    def encode(self) -> str:
        return f"{self.plan}:{self.file_groups}:{self.replacement or '-'}"

    @classmethod
    def decode_all(cls, value: str) -> list[GivenUp]:
        """The records of a ``GIVEN_UP_KEY`` value (malformed entries are skipped: the
        key is informational, written by this module only)."""
        records = []
        for entry in filter(None, value.split(",")):
            plan, _, rest = entry.partition(":")
            groups, _, replacement = rest.partition(":")
            if plan and groups.isdigit():
                records.append(
                    cls(plan, int(groups), None if replacement in ("", "-") else replacement)
                )
        return records


def encode_given_up(records: Iterable[GivenUp]) -> dict[str, str]:
    """The extraMetadata entry recording ``records`` (none when there are none)."""
    value = ",".join(record.encode() for record in records)
    return {GIVEN_UP_KEY: value} if value else {}


def is_protected(plan: ClusteringPlan) -> bool:
    return plan.extra_metadata.get(PROTECTED_KEY) == "true"


def protected(plan: ClusteringPlan) -> ClusteringPlan:
    """``plan`` marked as one ``replan`` writers wait for."""
    return replace(plan, extra_metadata={**plan.extra_metadata, PROTECTED_KEY: "true"})


class PlanRunningError(FailedPreconditionError):
    """A ``replan`` write touches the file groups of plan ``instant``, which a live runner
    is executing: the write lets go of the table lock and waits for the run's commit."""

    def __init__(self, instant: str, why: str = "is running on file groups this write updates"):
        super().__init__(
            f"clustering plan {instant} {why}; the write waits for its commit", field="clustering"
        )
        self.instant = instant


class PlanProtectedError(PlanRunningError):
    """A ``replan`` write touches the file groups of protected plan ``instant``: it lets go
    of the table lock and waits for the plan's run to commit."""

    def __init__(self, instant: str) -> None:
        super().__init__(
            instant,
            f"holds file groups this write updates and is protected ({PROTECT_AFTER_GIVE_UPS} "
            "plans were given up to writers since the last clustering)",
        )


def add_argument(parser: argparse.ArgumentParser) -> None:
    """``--on-pending-clustering`` of the write job."""
    parser.add_argument(
        "--on-pending-clustering",
        choices=POLICIES,
        default=REPLAN,
        help="an update, delete or insert_overwrite of a file group in a pending clustering "
        "plan takes the file group from the plan, waiting for its commit once its run "
        "started (replan, default), is refused as Hudi's copy-on-write writers do (reject), "
        "or rolls the plan back first (rollback)",
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

    def resolve(
        self, touched: Iterable[tuple[str, str]], policy: str, *, abandoned: Iterable[str] = ()
    ) -> list[GivenUp]:
        """Refuse (``reject``), roll back (``rollback``) or replan (``replan``) the plans
        holding a file group the write updates, deletes from or replaces; returns what was
        given up. A ``replan`` write waits for a running or protected plan
        (``PlanRunningError``) unless its instant is in ``abandoned``: protected, and
        still not run when the write's wait ended."""
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
                "--on-pending-clustering replan or rollback lets the write go on",
                field="clustering",
            )
        instants = sorted({instant for _, instant in hits})
        markers = StorageMarkerReader(self.table.storage)
        for instant in instants:
            if policy == REPLAN and live_run(self.table.storage, instant) is not None:
                raise PlanRunningError(instant)
            protected_plan = is_protected(self.plans[instant].plan)
            if policy == REPLAN and protected_plan and instant not in abandoned:
                raise PlanProtectedError(instant)
            check_not_running(self.table.storage, instant)
        given_up = []
        for instant in instants:
            rollback(self.table, instant, markers)
            forget_runs(self.table.storage, instant)
            taken = [key for key, plan in hits if plan == instant]
            if policy == REPLAN and instant not in abandoned:
                given_up.append(self._replan(instant, taken))
            else:
                given_up.append(GivenUp(instant, len(taken), None))
                log.warning(
                    "write.pending_clustering_rolled_back", table=self.table.uri, plan=instant
                )
        return given_up

    def _replan(self, instant: str, taken: list[tuple[str, str]]) -> GivenUp:
        """Save what is left of plan ``instant`` (rolled back) as a new plan."""
        rest = without_file_groups(self.plans[instant], taken)
        replacement = save_plan(self.table, rest).timestamp if rest is not None else None
        log.info(
            "write.pending_clustering_replanned",
            table=self.table.uri,
            plan=instant,
            file_groups_taken=len(taken),
            replacement=replacement,
        )
        return GivenUp(instant, len(taken), replacement)


@dataclass(frozen=True)
class GivenUpTo:
    """A plan given up, and the write that took its file groups (``completed`` or still
    inflight)."""

    record: GivenUp
    write: str
    completed: bool = True


def given_up_plans(
    table: HoodieTable, after: str | None = None, *, inflight: bool = False
) -> list[GivenUpTo]:
    """The plans given up to completed writes later than ``after`` on the active timeline
    (and to inflight ones, from their workload profile, with ``inflight``), oldest first.
    A completed commit's metadata is parsed once per process: the timeline caches it."""
    timeline = table.timeline
    found = []
    for instant in timeline.instants():
        if instant.action not in WRITE_ACTIONS or (
            after is not None and instant.timestamp <= after
        ):
            continue
        if instant.is_completed:
            metadata = timeline.read_metadata(instant)
        elif inflight and instant.state is State.INFLIGHT:
            metadata = read_parsed(table.storage, instant.path, timeline.decode_metadata)
        else:
            continue
        records = GivenUp.decode_all(metadata.extra_metadata.get(GIVEN_UP_KEY, ""))
        found += [GivenUpTo(record, instant.timestamp, instant.is_completed) for record in records]
    return found


def given_up_since_clustering(table: HoodieTable) -> list[GivenUpTo]:
    """The plans given up since the table's last completed clustering: how long writers
    have kept clustering from its turn."""
    timeline = table.timeline
    last = next(
        (
            instant.timestamp
            for instant in reversed(timeline.completed(frozenset({REPLACE_COMMIT})))
            if timeline.read_metadata(instant).operation_type == CLUSTER_OPERATION
        ),
        None,
    )
    return given_up_plans(table, after=last)


def find_pending_plan(table: HoodieTable, timestamp: str) -> PendingPlan:
    """``pending_plan``, except that a plan given up to writers is said to be, naming the
    writes that took its file groups and what is left of it to run."""
    try:
        return pending_plan(table, timestamp)
    except NotFoundError as missing:
        story = _given_up_story(table, timestamp)
        if not story:
            raise
        raise FailedPreconditionError(
            f"clustering plan {timestamp} was given up to writers: {'; '.join(story)}",
            field="instant",
        ) from missing


def _given_up_story(table: HoodieTable, timestamp: str) -> list[str]:
    """What became of plan ``timestamp`` and the plans cut from it, one clause each."""
    gone_plans = given_up_plans(table, after=timestamp, inflight=True)
    by_plan = {gone.record.plan: gone for gone in gone_plans}
    story = []
    plan: str | None = timestamp
    while plan is not None and plan in by_plan:
        gone = by_plan[plan]
        rest = gone.record.replacement
        writing = "" if gone.completed else " (still writing)"
        story.append(
            f"write {gone.write}{writing} took {gone.record.file_groups} file groups of plan "
            f"{plan}, " + (f"the rest went to plan {rest}" if rest else "nothing was left to run")
        )
        plan = rest
    if story and plan is not None:
        story.append(f"plan {plan} holds what is left")
    return story
