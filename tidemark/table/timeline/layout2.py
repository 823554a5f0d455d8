"""The active timeline of timeline layout 2 (table versions 8 and 9).

Instants live under ``.hoodie/timeline/``: ``<requested>.<action>.requested``,
``<requested>.<action>.inflight`` (a commit's is ``<requested>.inflight``) and, once done,
``<requested>_<completion>.<action>``. Every instant's metadata is Avro. State changes are
create-if-absent as on layout 1; the completion time is taken by the lock holder as it
completes, so completion times only move forward across writers.
"""

from __future__ import annotations

from collections.abc import Collection

import structlog

from tidemark.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
)
from tidemark.storage.base import Storage
from tidemark.storage.damaged import read_parsed
from tidemark.table.metadata.actions import CLUSTERING, WRITE_ACTIONS, completed_action
from tidemark.table.metadata.commit import CommitMetadata
from tidemark.table.metadata.commit_avro import commit_metadata_from_avro, commit_metadata_to_avro
from tidemark.table.timeline.instant import (
    LAYOUT2_ACTIONS,
    TIMELINE_FOLDERS,
    Instant,
    State,
    new_instant_time,
    parse_layout2_file_name,
    validate_instant_time,
)
from tidemark.table.timeline.layout1 import Timeline

log = structlog.get_logger(__name__)

TIMELINE_DIR = TIMELINE_FOLDERS[2]


class LayoutTwoTimeline(Timeline):
    """A snapshot of a layout-2 timeline; ``version`` is the table version (8 or 9)."""

    LAYOUT = 2
    CLUSTERING_ACTION = CLUSTERING

    def __init__(self, storage: Storage, version: int) -> None:
        self.version = version
        super().__init__(storage)

    def _list(self) -> None:
        """One instant per requested time (Hudi never reuses one across actions), in its
        latest state: a clustering's ``clustering`` files give way to its completed
        ``replacecommit``."""
        latest: dict[str, Instant] = {}
        requested: dict[str, str] = {}
        for info in self.storage.list_dir(TIMELINE_DIR).files:
            instant = parse_layout2_file_name(info.path[len(TIMELINE_DIR) :])
            if instant is None:
                continue
            if instant.state is State.REQUESTED:
                requested[instant.timestamp] = instant.action
            known = latest.get(instant.timestamp)
            if known is None or known.state < instant.state:
                latest[instant.timestamp] = instant
        self._instants = sorted(latest.values())
        self._requested_actions = {
            timestamp: action
            for timestamp, action in requested.items()
            if latest[timestamp].action != action
        }

    def last_completed(self, actions: frozenset[str] | None = WRITE_ACTIONS) -> Instant | None:
        """The instant that completed last: the table's state is the one it left."""
        done = self.completed(actions)
        return max(done, key=lambda i: i.completed_at) if done else None

    def read_metadata(self, instant: Instant) -> CommitMetadata:
        if not instant.is_completed or instant.action not in WRITE_ACTIONS:
            raise FailedPreconditionError(
                f"{instant.file_name} is not a completed write"
                " (commit, deltacommit or replacecommit)",
                field="instant",
            )
        return read_parsed(self.storage, instant.path, self.decode_metadata)

    def latest_timestamp(self) -> str | None:
        """The latest requested or completion time: a new instant starts after both
        (``create_requested`` refuses one that does not)."""
        times = [t for i in self._instants for t in (i.timestamp, i.completion_time) if t]
        return max(times) if times else None

    def transition_inflight(self, timestamp: str, action: str, payload: bytes = b"") -> Instant:
        pending = self._pending_in_state(timestamp, action, State.REQUESTED)
        return self._create(Instant(timestamp, pending.action, State.INFLIGHT, layout=2), payload)

    def complete(self, timestamp: str, action: str, metadata: bytes) -> Instant:
        """Publish ``<requested>_<completion>.<action>``. The completion time is taken
        here, from a timeline just read, by the holder of the table lock (the fence is
        checked before the file is made): it is later than every requested and completion
        time any writer put on the timeline."""
        self._pending_in_state(timestamp, action, State.INFLIGHT)
        completion = new_instant_time(after=self.latest_timestamp())
        done = Instant(timestamp, action, State.COMPLETED, completion, layout=2)
        return self._create(done, metadata)

    def concurrent_writes(
        self, timestamp: str, seen: Collection[str] | None = None
    ) -> list[Instant]:
        """With ``seen``, as on layout 1; else the 1.0 spec's rule: the write requested
        at ``timestamp`` was requested after every time on the timeline, so an action
        completed later than that ran beside it."""
        if seen is not None:
            return super().concurrent_writes(timestamp, seen)
        self.refresh()
        return [
            other
            for other in self.completed(WRITE_ACTIONS)
            if other.timestamp != timestamp and other.completed_at > timestamp
        ]

    def encode_metadata(self, metadata: CommitMetadata, action: str) -> bytes:
        return commit_metadata_to_avro(metadata, action)

    def decode_metadata(self, data: bytes) -> CommitMetadata:
        return commit_metadata_from_avro(data)

    def delete_pending(self, instant: Instant) -> None:
        """Inflight first, as on layout 1: a crash in between leaves a requested instant."""
        self._check_pending(instant)
        self._check_fence()
        for state in (State.INFLIGHT, State.REQUESTED):
            self.storage.delete(Instant(instant.timestamp, instant.action, state, layout=2).path)
        self._instants = [i for i in self._instants if i.timestamp != instant.timestamp]

    def revert_to_requested(self, instant: Instant) -> None:
        self._check_pending(instant)
        self._check_fence()
        self.storage.delete(
            Instant(instant.timestamp, instant.action, State.INFLIGHT, layout=2).path
        )
        requested = Instant(instant.timestamp, instant.action, State.REQUESTED, layout=2)
        self._replace(requested)

    def _pending_in_state(self, timestamp: str, action: str, state: State) -> Instant:
        """The pending instant at ``timestamp`` if it is in ``state``: the timeline folder
        holds instants only (markers live elsewhere), so it is listed rather than probed,
        as a completed file's name holds a completion time no probe can guess."""
        validate_instant_time(timestamp)
        self._check_action(action)
        self.refresh()
        found = next((i for i in self._instants if i.timestamp == timestamp), None)
        if found is None or not _same_action(found.action, action):
            raise NotFoundError(f"no {state.name} {action} instant {timestamp}", field="instant")
        if found.state > state:
            raise FailedPreconditionError(
                f"{action} instant {timestamp} is already past {state.name}", field="instant"
            )
        if found.state < state:
            raise FailedPreconditionError(
                f"{action} instant {timestamp} is not {state.name} yet", field="instant"
            )
        return found

    def _replace(self, instant: Instant) -> None:
        """One instant per requested time (a clustering completes as a replacecommit)."""
        earlier = next((i for i in self._instants if i.timestamp == instant.timestamp), None)
        if earlier is not None and earlier.action != instant.action:
            self._requested_actions[instant.timestamp] = self.requested(earlier).action
        others = [i for i in self._instants if i.timestamp != instant.timestamp]
        self._instants = sorted([*others, instant])

    @staticmethod
    def _check_pending(instant: Instant) -> None:
        if instant.is_completed:
            raise FailedPreconditionError(
                f"instant {instant.timestamp} is completed", field="instant"
            )

    @staticmethod
    def _check_action(action: str) -> None:
        if action not in LAYOUT2_ACTIONS:
            raise InvalidArgumentError(f"unknown timeline action {action!r}", field="action")


def _same_action(found: str, wanted: str) -> bool:
    """A clustering is pending as ``clustering`` and completes as ``replacecommit``, a
    compaction as ``compaction`` and completes as ``commit``."""
    return found == wanted or completed_action(found) == wanted
