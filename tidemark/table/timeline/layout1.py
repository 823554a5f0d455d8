"""The active timeline: instant files directly under ``.hoodie/``.

State changes are object creations with create-if-absent, so a completed instant is never
overwritten and two writers cannot both start the same instant.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

import structlog

from tidemark.errors import (
    AlreadyExistsError,
    ConflictError,
    FailedPreconditionError,
    NotFoundError,
)
from tidemark.storage.base import Storage
from tidemark.storage.damaged import read_parsed
from tidemark.table.metadata.actions import (
    REPLACE_COMMIT,
    ROLLBACK,
    WRITE_ACTIONS,
    completed_action,
)
from tidemark.table.metadata.commit import CommitMetadata
from tidemark.table.metadata.rollback import RollbackMetadata
from tidemark.table.timeline.instant import (
    Instant,
    State,
    parse_instant_file_name,
    validate_action,
    validate_instant_time,
)
from tidemark.table.timeline.parsed_files import ParsedFiles

log = structlog.get_logger(__name__)

TIMELINE_DIR = ".hoodie/"
METADATA_CACHE_ENTRIES = 1024
"""Completed commits' metadata kept per process: a completed instant file is never
rewritten (create-if-absent), so a writer that reads the timeline again each micro-batch
(idempotency keys, recent record sizes, replaced file groups) parses only new commits."""

metadata_cache: ParsedFiles[CommitMetadata] = ParsedFiles(METADATA_CACHE_ENTRIES)


class Fence(Protocol):
    """Proves the writer still holds the table lock (``StorageLease.check``), else raises."""

    def check(self) -> None: ...


class Timeline:
    """A snapshot of the timeline, refreshed by ``reload()`` and by this object's writes.

    With a ``fence`` set, every state change (new instant file, deleted pending instant)
    first proves that the writer still holds the table lock, so a writer that lost it
    never moves an instant forward."""

    LAYOUT = 1
    """The timeline layout of the instants this class writes (layout 2: ``timeline_v2``)."""
    CLUSTERING_ACTION = REPLACE_COMMIT
    """The action of a pending clustering plan: a requested replacecommit holding the plan
    on layout 1 (layout 2: ``clustering``); it completes as a replacecommit on both."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.fence: Fence | None = None
        self._loaded_under: Fence | None = None
        self._instants: list[Instant] = []
        self._sizes: dict[str, int] = {}
        """Size of each instant file as last listed (metadata cache keys)."""
        self._requested_actions: dict[str, str] = {}
        """Requested time -> the action of its requested file, where it differs from the
        instant's (a completed compaction's ``compaction.requested``; on layout 2 a
        completed clustering's ``clustering.requested`` too)."""
        self.reload()

    def refresh(self) -> None:
        """Reload unless the timeline was loaded under the table lock that fences it now:
        while a party holds the lock only it changes the timeline, through this object,
        whose instants follow every change it makes, so a reload would list the same.
        (``locked.changing`` loads it as it takes the lock.)"""
        if self.fence is None or self._loaded_under is not self.fence:
            self.reload()

    def reload(self) -> None:
        """List only the top level of ``.hoodie/``: marker dirs below ``.temp`` can hold
        hundreds of thousands of objects and must not be listed on every reload."""
        self._loaded_under = self.fence
        self._list()

    def _list(self) -> None:
        """One instant per requested time and completed action: a compaction's
        ``compaction`` files give way to its completed ``commit``."""
        latest: dict[tuple[str, str], Instant] = {}
        requested: dict[tuple[str, str], str] = {}
        sizes: dict[str, int] = {}
        for info in self.storage.list_dir(TIMELINE_DIR).files:
            instant = parse_instant_file_name(info.path[len(TIMELINE_DIR) :])
            if instant is None:
                continue
            sizes[instant.path] = info.size
            key = (instant.timestamp, completed_action(instant.action))
            if instant.state is State.REQUESTED:
                requested[key] = instant.action
            if key not in latest or latest[key].state < instant.state:
                latest[key] = instant
        self._instants = sorted(latest.values())
        self._sizes = sizes
        metadata_cache.retain(self.storage.uri, sizes)
        self._requested_actions = {
            key[0]: action for key, action in requested.items() if latest[key].action != action
        }

    def instants(self) -> list[Instant]:
        """Every instant in its latest state, sorted by time."""
        return list(self._instants)

    def completed(self, actions: frozenset[str] | None = None) -> list[Instant]:
        return [
            instant
            for instant in self._instants
            if instant.is_completed and (actions is None or instant.action in actions)
        ]

    def pending(self) -> list[Instant]:
        return [instant for instant in self._instants if not instant.is_completed]

    def last_completed(self, actions: frozenset[str] | None = WRITE_ACTIONS) -> Instant | None:
        done = self.completed(actions)
        return done[-1] if done else None

    def is_completed(self, timestamp: str) -> bool:
        return any(i.timestamp == timestamp and i.is_completed for i in self._instants)

    def latest_timestamp(self) -> str | None:
        return self._instants[-1].timestamp if self._instants else None

    def requested(self, instant: Instant) -> Instant:
        """The requested file of ``instant`` (in any state), where its plan is kept: a
        completed compaction's is ``<t>.compaction.requested``."""
        action = self._requested_actions.get(instant.timestamp, instant.action)
        return Instant(instant.timestamp, action, State.REQUESTED, layout=self.LAYOUT)

    def find(self, timestamp: str) -> Instant:
        """The instant at ``timestamp`` (latest state); NotFoundError if absent."""
        validate_instant_time(timestamp)
        for instant in reversed(self._instants):
            if instant.timestamp == timestamp:
                return instant
        raise NotFoundError(f"no instant {timestamp} on the timeline", field="instant")

    def create_requested(self, timestamp: str, action: str, payload: bytes = b"") -> Instant:
        validate_instant_time(timestamp)
        self._check_action(action)
        self.refresh()
        if any(instant.timestamp == timestamp for instant in self._instants):
            raise AlreadyExistsError(f"instant {timestamp} already exists", field="instant")
        latest = self.latest_timestamp()
        if latest is not None and timestamp <= latest:
            raise FailedPreconditionError(
                f"instant {timestamp} is not after the latest instant {latest}", field="instant"
            )
        return self._create(
            Instant(timestamp, action, State.REQUESTED, layout=self.LAYOUT), payload
        )

    def transition_inflight(self, timestamp: str, action: str, payload: bytes = b"") -> Instant:
        self._expect_state(timestamp, action, State.REQUESTED)
        return self._create(Instant(timestamp, action, State.INFLIGHT), payload)

    def complete(self, timestamp: str, action: str, metadata: bytes) -> Instant:
        """Publish the completed instant; readers see the commit from this object on.
        ``action`` is the completed one (``commit`` for a compaction, which is pending as
        ``compaction`` in the snapshot)."""
        pending = next(
            (
                i.action
                for i in self._instants
                if i.timestamp == timestamp
                and not i.is_completed
                and completed_action(i.action) == action
            ),
            action,
        )
        self._expect_state(timestamp, pending, State.INFLIGHT)
        return self._create(Instant(timestamp, action, State.COMPLETED), metadata)

    def check_concurrent(
        self,
        timestamp: str,
        metadata: CommitMetadata,
        seen: Collection[str] | None = None,
    ) -> None:
        """The conflict check, run by the lock holder just before it completes the write
        requested at ``timestamp``: no write that completed while it ran
        (``concurrent_writes``) wrote or replaced a file group this one writes or
        replaces; ConflictError naming that write otherwise, and nothing is published. A
        compaction conflicts with no write, as in Hudi: it rewrites a slice as of its own
        instant, and the deltacommits beside it append to the file group's next slice
        (on table version 6 writers leave groups in a pending compaction alone,
        ``plans.compaction``)."""
        if metadata.is_compaction:
            return
        mine = metadata.touched_file_groups()
        for other in self.concurrent_writes(timestamp, seen):
            theirs = self.read_metadata(other)
            if theirs.is_compaction:
                continue
            shared = sorted(mine & theirs.touched_file_groups())
            if shared:
                partition, file_id = shared[0]
                completed = f" at {other.completion_time}" if other.completion_time else ""
                raise ConflictError(
                    f"file group {file_id} (partition {partition!r}) was written by "
                    f"{other.action} {other.timestamp}, completed{completed} after this "
                    f"write started at {timestamp}; retry the write",
                    field="instant",
                )

    def concurrent_writes(
        self, timestamp: str, seen: Collection[str] | None = None
    ) -> list[Instant]:
        """Completed writes that completed while the write requested at ``timestamp`` ran:
        those not among ``seen``, the writes completed when it read the table. Without
        ``seen`` (a party that held the table lock from its read on) layout 1 has none,
        as it records no completion times (layout 2 reads them)."""
        if seen is None:
            return []
        self.refresh()
        return [
            other
            for other in self.completed(WRITE_ACTIONS)
            if other.timestamp != timestamp and other.timestamp not in seen
        ]

    def encode_metadata(self, metadata: CommitMetadata, action: str) -> bytes:
        """A completed write's file content: JSON on layout 1 (Avro on layout 2)."""
        return metadata.to_json()

    def decode_metadata(self, data: bytes) -> CommitMetadata:
        """Commit metadata in this layout's encoding (a completed write's, or the partial
        metadata Hudi puts in a write's inflight file)."""
        return CommitMetadata.from_json(data)

    def read_metadata(self, instant: Instant) -> CommitMetadata:
        if not instant.is_completed or instant.action not in WRITE_ACTIONS:
            raise FailedPreconditionError(
                f"{instant.file_name} is not a completed write"
                " (commit, deltacommit or replacecommit)",
                field="instant",
            )
        size = self._sizes.get(instant.path)
        if size is None:
            return read_parsed(self.storage, instant.path, CommitMetadata.from_json)
        return metadata_cache.read(
            (self.storage.uri, instant.path, size),
            lambda: read_parsed(self.storage, instant.path, CommitMetadata.from_json),
        )

    def rollbacks(self, after: str | None = None) -> list[tuple[Instant, RollbackMetadata]]:
        """Every completed rollback on the active timeline later than ``after`` (all when
        None), oldest first, with its metadata: one read each."""
        return [
            (instant, read_parsed(self.storage, instant.path, RollbackMetadata.from_avro))
            for instant in self.completed(frozenset({ROLLBACK}))
            if after is None or instant.timestamp > after
        ]

    def delete_pending(self, instant: Instant) -> None:
        """Remove a pending instant's files, inflight first: a crash in between leaves a
        requested instant, which the next writer rolls back again."""
        if instant.is_completed:
            raise FailedPreconditionError(
                f"instant {instant.timestamp} is completed", field="instant"
            )
        self._check_fence()
        for state in (State.INFLIGHT, State.REQUESTED):
            self.storage.delete(Instant(instant.timestamp, instant.action, state).path)
        key = (instant.timestamp, instant.action)
        self._instants = [i for i in self._instants if (i.timestamp, i.action) != key]

    def revert_to_requested(self, instant: Instant) -> None:
        """Delete a pending instant's inflight file, keeping its requested file (and the
        plan it carries); no-op for a requested instant. A rollback's first step: the
        write's tasks check that file after creating each marker and before writing the
        file (``require_inflight``), so from then on none of them starts a file, and the
        markers read afterwards name every file the write can still publish. A crash
        after this leaves a requested instant, rolled back again by the next writer."""
        if instant.is_completed:
            raise FailedPreconditionError(
                f"instant {instant.timestamp} is completed", field="instant"
            )
        self._check_fence()
        self.storage.delete(Instant(instant.timestamp, instant.action, State.INFLIGHT).path)
        requested = Instant(instant.timestamp, instant.action, State.REQUESTED)
        key = (instant.timestamp, instant.action)
        self._instants = sorted(
            [*(i for i in self._instants if (i.timestamp, i.action) != key), requested]
        )

    def _expect_state(self, timestamp: str, action: str, state: State) -> None:
        """Check with two HEAD requests (not a listing, which would include every marker)
        that the instant is in ``state`` and has not moved past it."""
        validate_instant_time(timestamp)
        validate_action(action)
        later = Instant(timestamp, action, State(state + 1))
        if self.storage.exists(later.path):
            raise FailedPreconditionError(
                f"{action} instant {timestamp} is already past {state.name}", field="instant"
            )
        if self.storage.exists(Instant(timestamp, action, state).path):
            return
        if state is not State.REQUESTED and self.storage.exists(
            Instant(timestamp, action, State(state - 1)).path
        ):
            raise FailedPreconditionError(
                f"{action} instant {timestamp} is not {state.name} yet", field="instant"
            )
        raise NotFoundError(f"no {state.name} {action} instant {timestamp}", field="instant")

    @staticmethod
    def _check_action(action: str) -> None:
        validate_action(action)

    def _check_fence(self) -> None:
        if self.fence is not None:
            self.fence.check()

    def _create(self, instant: Instant, payload: bytes) -> Instant:
        self._check_fence()
        if not self.storage.create_if_absent(instant.path, payload):
            raise AlreadyExistsError(f"{instant.file_name} already exists", field="instant")
        log.info(
            "timeline.transition",
            instant=instant.timestamp,
            action=instant.action,
            state=instant.state.name,
            completed_at=instant.completion_time,
        )
        self._replace(instant)
        return instant

    def _replace(self, instant: Instant) -> None:
        """Put ``instant`` in the snapshot in place of its earlier state (a completed
        commit in place of its pending compaction)."""
        key = (instant.timestamp, completed_action(instant.action))
        earlier = [i for i in self._instants if (i.timestamp, completed_action(i.action)) == key]
        if earlier and earlier[0].action != instant.action:
            self._requested_actions[instant.timestamp] = self.requested(earlier[0]).action
        others = [i for i in self._instants if i not in earlier]
        self._instants = sorted([*others, instant])


def require_inflight(storage: Storage, timestamp: str, action: str) -> None:
    """A write task's check after creating a file's marker and before writing the file:
    ConflictError(field="instant") unless the instant is still inflight. A rollback first
    deletes the inflight file (``Timeline.revert_to_requested``) and only then reads the
    markers, so a task that passes this check created its marker before that read."""
    inflight = Instant(timestamp, action, State.INFLIGHT)
    if not storage.exists(inflight.path) and not storage.exists(
        Instant(timestamp, action, State.INFLIGHT, layout=2).path
    ):
        raise ConflictError(
            f"{action} instant {timestamp} is no longer inflight (it was rolled back); "
            "the task writes no file",
            field="instant",
        )
