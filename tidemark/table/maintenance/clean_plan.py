"""Which files a clean deletes: Hudi's cleaner policies, on copy-on-write and
merge-on-read tables alike.

The unit is a file slice (``FileSystemView.file_slices``): a base file and, on a
merge-on-read table, the log files appended to it; a slice no longer needed goes whole,
base and logs (Hudi's ``CleanPlanner``), and the plan lists each file. Deltacommits count
as writes (retained commits, the earliest commit to retain).

- ``KEEP_LATEST_COMMITS`` (default, 10 retained): the earliest commit to retain is the
  N-th latest completed write (never after the earliest pending instant); a slice older
  than it is deleted unless it is its file group's latest slice before it. Every snapshot
  from that instant on stays whole.
- ``KEEP_LATEST_BY_HOURS``: the same, the earliest commit to retain being the first
  completed write at most H hours old.
- ``KEEP_LATEST_FILE_VERSIONS``: each file group keeps its N latest slices.

On table versions 8 and 9 the retained commits are counted in completion order and a
slice is judged by when the write that superseded it completed (the 1.0 spec's file
slicing): a slice is deleted once a later slice of its group (greater requested time)
completed before the earliest commit to retain did. On version 6, which records no
completion times, the requested time stands in and the rules reduce to Hudi 0.x's.

File groups replaced by a completed replacecommit (clustering, insert_overwrite) are
deleted whole once that instant is older than the earliest commit to retain (under
KEEP_LATEST_FILE_VERSIONS, at once, as Hudi does). Never deleted: a file group's latest
slice, any file of a group a pending clustering plan reads, the slices a pending
compaction needs (those of its file groups from the plan's base instant on: under
KEEP_LATEST_FILE_VERSIONS they count as one of the versions kept, as Hudi counts them),
files of pending or failed instants (not committed, so not listed here; rollback and
orphan cleaning handle them).
Savepoints are not supported: a table with one is refused.

Incremental as Hudi's (``hoodie.cleaner.incremental.mode``): under the two commit-based
policies only the partitions written by completed writes at or after the previous clean's
earliest commit to retain and before the new one are listed (a slice becomes deletable only
when a newer one falls before the earliest commit to retain); the first clean, or one after
a clean under another policy, lists every partition once, as does KEEP_LATEST_FILE_VERSIONS.
"""

from __future__ import annotations

import enum
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from tidemark.checks import require_positive
from tidemark.errors import FailedPreconditionError, InvalidArgumentError
from tidemark.table import HoodieTable
from tidemark.table.files.view import FileSlice, completion_times, last_clean
from tidemark.table.metadata.actions import WRITE_ACTIONS
from tidemark.table.metadata.clean import CleanMetadata, CleanPlan, RetainedInstant
from tidemark.table.plans.clustering import file_groups_in, pending_plans
from tidemark.table.plans.compaction import slices_needed_by_compactions
from tidemark.table.timeline.instant import Instant, instant_time_ago


class CleanPolicy(enum.StrEnum):
    KEEP_LATEST_COMMITS = "KEEP_LATEST_COMMITS"
    KEEP_LATEST_FILE_VERSIONS = "KEEP_LATEST_FILE_VERSIONS"
    KEEP_LATEST_BY_HOURS = "KEEP_LATEST_BY_HOURS"


DEFAULT_RETAIN_COMMITS = 10
DEFAULT_RETAIN_VERSIONS = 3
DEFAULT_RETAIN_HOURS = 24.0
SAVEPOINT = "savepoint"


@dataclass(frozen=True)
class CleanSettings:
    """Hudi's ``hoodie.cleaner.*`` settings; only the one of ``policy`` is used."""

    policy: CleanPolicy = CleanPolicy.KEEP_LATEST_COMMITS
    retain_commits: int = DEFAULT_RETAIN_COMMITS
    retain_versions: int = DEFAULT_RETAIN_VERSIONS
    retain_hours: float = DEFAULT_RETAIN_HOURS

    def __post_init__(self) -> None:
        if self.policy not in CleanPolicy.__members__:
            raise InvalidArgumentError(
                f"unknown cleaner policy {self.policy!r} (use {', '.join(CleanPolicy)})",
                field="policy",
            )
        object.__setattr__(self, "policy", CleanPolicy(self.policy))
        for name in ("retain_commits", "retain_versions", "retain_hours"):
            require_positive(name, getattr(self, name))


def plan_clean(table: HoodieTable, settings: CleanSettings) -> CleanPlan:
    """The files a clean at this moment deletes (empty when none); reads the timeline as
    the table's ``timeline`` last loaded it (reload it under the lock first)."""
    timeline = table.timeline
    savepoints = [i.timestamp for i in timeline.instants() if i.action == SAVEPOINT]
    if savepoints:
        raise FailedPreconditionError(
            f"the table has savepoints ({', '.join(savepoints)}), which Tidemark's cleaner "
            "does not support: delete them with Hudi first",
            field="table",
        )
    writes = sorted(timeline.completed(WRITE_ACTIONS), key=lambda i: i.completed_at)
    done_at = completion_times(timeline)
    previous = last_clean(timeline)
    last_write = writes[-1].timestamp if writes else ""
    retain = _earliest_to_retain(table, settings, writes)
    if previous is not None and previous.earliest_commit_to_retain:
        floor = previous.earliest_commit_to_retain
        if retain is None or done_at(retain.timestamp) < done_at(floor):
            retain = RetainedInstant(floor, _action_at(writes, floor))
    empty = CleanPlan(settings.policy, retain, {}, last_write)
    if settings.policy is not CleanPolicy.KEEP_LATEST_FILE_VERSIONS and retain is None:
        return empty
    partitions = _partitions_to_clean(table, settings, writes, previous, retain, done_at)
    if partitions is not None and not partitions:
        return empty
    view = table.view()
    protected = set(file_groups_in(pending_plans(table, reload=False)))
    compacting = slices_needed_by_compactions(table)
    replaced = view.replaced_file_groups()
    groups: dict[tuple[str, str], list[FileSlice]] = defaultdict(list)
    for file_slice in view.file_slices(partitions):
        groups[(file_slice.partition_path, file_slice.file_id)].append(file_slice)
    deletes: dict[str, list[str]] = defaultdict(list)
    readable_from = _by_completion(retain.timestamp if retain is not None else "", done_at)
    for key, slices in sorted(groups.items()):
        if key in protected:
            continue
        needed_from = compacting.get(key)
        unneeded = [s for s in slices if needed_from is None or s.base_instant < needed_from]
        replaced_by = replaced.get(key)
        if replaced_by is not None:
            doomed = _replaced_group(settings, replaced_by, retain, unneeded, done_at)
            if doomed:
                readable_from = max(readable_from, _by_completion(replaced_by, done_at))
        elif settings.policy is CleanPolicy.KEEP_LATEST_FILE_VERSIONS:
            keep = settings.retain_versions - (1 if needed_from is not None else 0)
            doomed = unneeded[: max(0, len(unneeded) - keep)]
            if doomed:
                kept = slices[len(doomed)].base_instant
                readable_from = max(readable_from, _by_completion(kept, done_at))
        else:
            assert retain is not None
            superseded = _superseded_before(slices, done_at(retain.timestamp), done_at)
            doomed = [s for s in superseded if s in unneeded]
        for file_slice in doomed:
            deletes[key[0]].extend(file_slice.paths)
    if settings.policy is CleanPolicy.KEEP_LATEST_FILE_VERSIONS and readable_from[1]:
        retain = RetainedInstant(readable_from[1], _action_at(writes, readable_from[1]))
    return CleanPlan(settings.policy, retain, dict(deletes), last_write)


def _by_completion(timestamp: str, done_at: Callable[[str], str]) -> tuple[str, str]:
    """(completion time, requested time): ordered by when the instant completed."""
    return (done_at(timestamp), timestamp) if timestamp else ("", "")


def _earliest_to_retain(
    table: HoodieTable, settings: CleanSettings, writes: list[Instant]
) -> RetainedInstant | None:
    """Hudi's earliest commit to retain among ``writes`` (in completion order), completed
    no later than the earliest pending write was requested (that write may still read
    what it supersedes); None when nothing is old enough."""
    if settings.policy is CleanPolicy.KEEP_LATEST_FILE_VERSIONS:
        return None
    if settings.policy is CleanPolicy.KEEP_LATEST_COMMITS:
        if len(writes) <= settings.retain_commits:
            return None
        chosen = writes[-settings.retain_commits]
    else:
        cutoff = instant_time_ago(settings.retain_hours * 3600)
        recent = [i for i in writes if i.completed_at >= cutoff]
        if len(recent) == len(writes) or not recent:
            return None
        chosen = recent[0]
    pending = [i for i in table.timeline.pending() if i.action in WRITE_ACTIONS]
    if pending and pending[0].timestamp < chosen.completed_at:
        older = [i for i in writes if i.completed_at < pending[0].timestamp]
        if not older:
            return None
        chosen = older[-1]
    return RetainedInstant(chosen.timestamp, chosen.action)


def _action_at(writes: list[Instant], timestamp: str) -> str:
    return next((i.action for i in writes if i.timestamp == timestamp), "commit")


def _partitions_to_clean(
    table: HoodieTable,
    settings: CleanSettings,
    writes: list[Instant],
    previous: CleanMetadata | None,
    retain: RetainedInstant | None,
    done_at: Callable[[str], str],
) -> set[str] | None:
    """The partitions to list (None: all of them): those of the writes that completed
    from the previous clean's earliest commit to retain to the new one."""
    if (
        settings.policy is CleanPolicy.KEEP_LATEST_FILE_VERSIONS
        or previous is None
        or previous.policy != settings.policy
        or not previous.earliest_commit_to_retain
        or retain is None
    ):
        return None
    if not any(i.timestamp == previous.earliest_commit_to_retain for i in writes):
        return None  # the range reaches into the archived timeline: list everything once
    start, end = done_at(previous.earliest_commit_to_retain), done_at(retain.timestamp)
    partitions: set[str] = set()
    for instant in writes:
        if start <= instant.completed_at < end:
            metadata = table.timeline.read_metadata(instant)
            partitions.update(metadata.partition_to_write_stats)
            partitions.update(metadata.partition_to_replace_file_ids)
    return partitions


def _replaced_group(
    settings: CleanSettings,
    replaced_by: str,
    retain: RetainedInstant | None,
    slices: list[FileSlice],
    done_at: Callable[[str], str],
) -> list[FileSlice]:
    """A replaced file group goes whole once its replacing instant completed before the
    earliest commit to retain did (under KEEP_LATEST_FILE_VERSIONS at once)."""
    if settings.policy is CleanPolicy.KEEP_LATEST_FILE_VERSIONS:
        return slices
    assert retain is not None
    return slices if done_at(replaced_by) < done_at(retain.timestamp) else []


def _superseded_before(
    slices: list[FileSlice], retained_at: str, done_at: Callable[[str], str]
) -> list[FileSlice]:
    """The slices (sorted by base instant) that a later slice completed before
    ``retained_at`` supersedes: no snapshot from then on shows them. The latest of the
    slices completed before it, and the group's latest slice, are always kept."""
    completed_before = [n for n, f in enumerate(slices) if done_at(f.base_instant) < retained_at]
    return slices[: completed_before[-1]] if completed_before else []
