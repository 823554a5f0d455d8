"""Retention policies: when the planner cleans and archives a table by itself.

Like the clustering trigger (``triggers.py``): on demand, after every N completed commits
since the table's last clean, or every S seconds; kept in the table
(``.hoodie/.tidemark/planner/retention-policy.json``), so a restarted service or another
process follows it. A run is ``tidemark.retention.run_retention``, the same clean then
archive every write runs, with the policy's settings: the table lock only to plan and to
commit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from google.protobuf import json_format

from tidemark.checks import require_positive
from tidemark.errors import InvalidArgumentError
from tidemark.proto.planner.v1 import planner_service_pb2 as pb
from tidemark.retention import RetentionSettings
from tidemark.services.planner.triggers import load_message
from tidemark.storage.base import Storage
from tidemark.table import HoodieTable
from tidemark.table.maintenance.archival import DEFAULT_KEEP_MAX, DEFAULT_KEEP_MIN, ArchiveSettings
from tidemark.table.maintenance.clean_plan import DEFAULT_RETAIN_COMMITS, CleanSettings
from tidemark.table.metadata.actions import CLEAN, WRITE_ACTIONS

POLICY_PATH = ".hoodie/.tidemark/planner/retention-policy.json"
MESSAGE_FIELDS = {"keep_min": "keep_min_commits", "keep_max": "keep_max_commits"}
"""The archiver's settings' names of the policy message's fields, for errors."""


@dataclass(frozen=True)
class RetentionPolicy:
    """At most one of ``every_n_commits`` and ``every_seconds``; neither means on demand."""

    every_n_commits: int = 0
    every_seconds: int = 0
    retain_commits: int = DEFAULT_RETAIN_COMMITS
    keep_min_commits: int = DEFAULT_KEEP_MIN
    keep_max_commits: int = DEFAULT_KEEP_MAX

    def __post_init__(self) -> None:
        if self.every_n_commits and self.every_seconds:
            raise InvalidArgumentError(
                "choose every_n_commits or every_seconds, not both", field="policy"
            )
        self.settings()

    def settings(self) -> RetentionSettings:
        """The cleaner's and archiver's settings (InvalidArgumentError when they clash)."""
        return RetentionSettings(
            CleanSettings(retain_commits=self.retain_commits),
            ArchiveSettings(self.keep_min_commits, self.keep_max_commits),
        )


def policy_from_message(message: pb.RetentionPolicy) -> RetentionPolicy:
    """A request's policy; unset numbers take Hudi's defaults; errors name the field."""
    kind = message.WhichOneof("trigger")
    for name in ("every_n_commits", "every_seconds"):
        if kind == name:
            require_positive(f"policy.{name}", getattr(message, name))
    try:
        return RetentionPolicy(
            every_n_commits=message.every_n_commits if kind == "every_n_commits" else 0,
            every_seconds=message.every_seconds if kind == "every_seconds" else 0,
            retain_commits=message.retain_commits or DEFAULT_RETAIN_COMMITS,
            keep_min_commits=message.keep_min_commits or DEFAULT_KEEP_MIN,
            keep_max_commits=message.keep_max_commits or DEFAULT_KEEP_MAX,
        )
    except InvalidArgumentError as error:
        field = MESSAGE_FIELDS.get(error.field or "", error.field)
        raise InvalidArgumentError(error.message, field=f"policy.{field}") from None


def policy_message(policy: RetentionPolicy) -> pb.RetentionPolicy:
    message = pb.RetentionPolicy(
        retain_commits=policy.retain_commits,
        keep_min_commits=policy.keep_min_commits,
        keep_max_commits=policy.keep_max_commits,
    )
    if policy.every_n_commits:
        message.every_n_commits = policy.every_n_commits
    elif policy.every_seconds:
        message.every_seconds = policy.every_seconds
    else:
        message.on_demand.SetInParent()
    return message


def load_policy(storage: Storage) -> RetentionPolicy:
    """The table's policy (on demand with Hudi's defaults when none is stored)."""
    stored = load_message(storage, POLICY_PATH, pb.RetentionPolicy())
    return RetentionPolicy() if stored is None else policy_from_message(stored)


def save_policy(storage: Storage, policy: RetentionPolicy) -> None:
    storage.write(POLICY_PATH, json_format.MessageToJson(policy_message(policy)).encode())


def commits_since_last_clean(table: HoodieTable) -> int:
    """Completed writes after the newest completed clean on the active timeline."""
    table.timeline.reload()
    last = table.timeline.last_completed(frozenset({CLEAN}))
    after = last.timestamp if last else ""
    return sum(1 for i in table.timeline.completed(WRITE_ACTIONS) if i.timestamp > after)


Run = Callable[[HoodieTable, str], object]
"""``run(table, trigger)``: the engine's retention run."""


class RetentionTrigger:
    """Asked by the trigger loop on every poll for each watched table: runs retention when
    the table's policy is due. A table whose commits were counted is counted again only
    after its next completed write."""

    def __init__(self, run: Run) -> None:
        self._run = run
        self._last_run: dict[str, float] = {}
        self._checked: dict[str, str] = {}
        self._lock = threading.Lock()

    def check(self, storage: Storage) -> bool:
        """Run the retention of the table at ``storage`` if its policy is due; True if it
        ran (the table opened only then, or when its commits are counted)."""
        policy = load_policy(storage)
        table_uri = storage.uri
        if policy.every_n_commits:
            table = HoodieTable.from_storage(storage)
            completed = table.timeline.last_completed()
            latest = completed.timestamp if completed else ""
            if self._checked.get(table_uri) == latest:
                return False
            self._checked[table_uri] = latest
            if commits_since_last_clean(table) < policy.every_n_commits:
                return False
            self._run(table, "commits")
            return True
        if policy.every_seconds:
            now = time.monotonic()
            with self._lock:
                since = self._last_run.setdefault(table_uri, now)
                due = now - since >= policy.every_seconds
                if due:
                    self._last_run[table_uri] = now
            if due:
                self._run(HoodieTable.from_storage(storage), "periodic")
            return due
        return False
