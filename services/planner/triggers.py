"""The trigger loop: the planner schedules a table's clustering by itself.

A policy is on demand (nothing scheduled by itself), after every N completed commits
since the table's last clustering plan (Hudi's ``hoodie.clustering.inline.max.commits``),
or every S seconds. It is kept in the table (``.hoodie/.tidemark/planner/trigger-policy.json``,
a folder Hudi readers never list), so a restarted service, or another service process,
follows the same policy. The trigger loop schedules through the same path as a request:
under the table lock, never on top of a pending plan's file groups.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

import structlog
from google.protobuf import json_format
from google.protobuf.message import Message

from tidemark.clustering.strategy import PlanOptions
from tidemark.errors import DataLossError, NotFoundError, TidemarkError
from tidemark.proto.planner.v1 import planner_service_pb2 as pb
from tidemark.services.planner import messages, requests
from tidemark.services.planner.policy import TriggerPolicy
from tidemark.storage import open_storage
from tidemark.storage.base import Storage
from tidemark.storage.damaged import read_parsed
from tidemark.table import HoodieTable
from tidemark.table.metadata.actions import COMMIT, REPLACE_COMMIT
from tidemark.table.plans.clustering import plan_of

log = structlog.get_logger(__name__)
M = TypeVar("M", bound=Message)

POLICY_PATH = ".hoodie/.tidemark/planner/trigger-policy.json"


def load_policy(storage: Storage) -> TriggerPolicy:
    """The table's policy (on demand when none is stored), stored as the JSON form of
    the ``TriggerPolicy`` message that set it."""
    stored = load_message(storage, POLICY_PATH, pb.TriggerPolicy())
    return TriggerPolicy() if stored is None else requests.trigger_policy(stored)


def load_message(storage: Storage, path: str, empty: M) -> M | None:
    """The message stored as JSON at ``path`` (None when absent; DataLossError naming the
    file when it does not parse)."""

    def parse(data: bytes) -> M:
        try:
            return json_format.Parse(data, empty)
        except json_format.ParseError as error:
            raise ValueError(str(error)) from error

    try:
        return read_parsed(storage, path, parse, "set the policy again")
    except NotFoundError:
        return None


def save_policy(storage: Storage, policy: TriggerPolicy) -> None:
    """Store the policy; on demand deletes it."""
    if policy.on_demand:
        storage.delete(POLICY_PATH)
    else:
        storage.write(
            POLICY_PATH, json_format.MessageToJson(messages.policy_message(policy)).encode()
        )


def commits_since_last_plan(table: HoodieTable) -> int:
    """Completed writes after the newest clustering plan (pending or completed) on the
    active timeline; all completed writes when there is none."""
    table.timeline.reload()
    last_plan = ""
    for instant in reversed(table.timeline.instants()):
        try:
            if plan_of(table, instant) is not None:
                last_plan = instant.timestamp
                break
        except (NotFoundError, DataLossError):
            continue
    return sum(
        1
        for instant in table.timeline.completed(frozenset({COMMIT, REPLACE_COMMIT}))
        if instant.timestamp > last_plan
    )


Schedule = Callable[[HoodieTable, PlanOptions, str], object]
"""``schedule(table, options, trigger)``: the engine's scheduling path."""
Check = Callable[[Storage], object]
"""A check each poll makes of each watched table, given its storage."""


class TriggerLoop:
    """A daemon thread looking at every watched table each ``poll_s``: due policies
    schedule a plan. A table whose N commits found nothing to cluster waits for the next
    commit before trying again, so a quiet table never takes its lock on every poll.

    The loop is the planner's own entry point for the tables it watches, as a request is
    for the table it names: each poll opens the table's storage again, and its checks open
    the table from it only when a policy reads its timeline (the compaction check reads its
    properties each poll: is it merge-on-read?). Nothing is kept open between
    polls because the table changes under a long-lived service: an upgrade rewrites
    ``hoodie.properties`` and moves the timeline to another layout, a table can be dropped
    and created again, and an on-demand copy-on-write table (most) costs a few GETs per poll
    this way (its policies, its properties); a merge-on-read table also lists its timeline
    for its compaction backlog, read again only when the timeline changed."""

    def __init__(self, schedule: Schedule, poll_s: float, also: Sequence[Check] = ()) -> None:
        self._schedule = schedule
        self._also = tuple(also)
        """More checks each poll makes of each table (the retention trigger)."""
        self._poll_s = poll_s
        self._tables: dict[str, float] = {}
        """Watched table URI -> when it was last scheduled periodically (or watched)."""
        self._checked: dict[str, str] = {}
        """Table URI -> latest instant when its commit trigger last ran."""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="planner-triggers", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def watch(self, table_uri: str) -> None:
        with self._lock:
            self._tables.setdefault(table_uri, time.monotonic())

    def watched(self) -> list[str]:
        with self._lock:
            return sorted(self._tables)

    def _run(self) -> None:
        while not self._stop.wait(self._poll_s):
            for table_uri in self.watched():
                try:
                    storage = open_storage(table_uri)
                except TidemarkError as error:
                    log.warning("planner.trigger_failed", table=table_uri, error=str(error))
                    continue
                for check in (self.check, *self._also):
                    try:
                        check(storage)
                    except TidemarkError as error:
                        log.warning("planner.trigger_failed", table=table_uri, error=str(error))

    def check(self, storage: Storage) -> bool:
        """Schedule the table at ``storage`` if its policy is due; True if it tried."""
        policy = load_policy(storage)
        table_uri = storage.uri
        if policy.every_n_commits:
            table = HoodieTable.from_storage(storage)
            latest = table.timeline.latest_timestamp() or ""
            if self._checked.get(table_uri) == latest:
                return False
            if commits_since_last_plan(table) < policy.every_n_commits:
                return False
            self._checked[table_uri] = latest
            self._schedule(table, policy.options, "commits")
            return True
        if policy.every_seconds:
            now = time.monotonic()
            with self._lock:
                due = now - self._tables.get(table_uri, now) >= policy.every_seconds
                if due:
                    self._tables[table_uri] = now
            if due:
                self._schedule(HoodieTable.from_storage(storage), policy.options, "periodic")
            return due
        return False
