"""Instants: ``<timestamp>.<action>[.<state>]`` files on the Hudi timeline, and their times.

Instant times are 17 digits ``yyyyMMddHHmmssSSS`` (UTC here). The commit action's inflight
file is ``<ts>.inflight`` (no action), a quirk of Hudi's layout 1 that readers rely on.

Timeline layout 2 (table versions 8 and 9) keeps the files under ``.hoodie/timeline/`` and
names a completed instant ``<requested>_<completion>.<action>``, with the time it completed;
a pending clustering there is the action ``clustering``, completed as ``replacecommit``. A
compaction is pending as ``compaction`` and completes as ``commit`` on both layouts.
"""

from __future__ import annotations

import enum
import functools
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from tidemark.errors import InvalidArgumentError
from tidemark.table.metadata.actions import (
    ACTIONS,
    CLUSTERING,
    COMMIT,
    completed_action,
)

_SECONDS_FORMAT = "%Y%m%d%H%M%S"
_INSTANT_TIME = re.compile(r"\d{17}")
_FILE_NAME = re.compile(r"(?P<ts>\d{17})\.(?P<rest>[a-z]+(?:\.[a-z]+)?)")
_LAYOUT2_FILE_NAME = re.compile(
    r"(?P<ts>\d{17})(?:_(?P<completed>\d{17}))?\.(?P<rest>[a-z]+(?:\.[a-z]+)?)"
)
LAYOUT2_ACTIONS = ACTIONS | {CLUSTERING}
TIMELINE_FOLDERS = {1: ".hoodie/", 2: ".hoodie/timeline/"}
"""Where each timeline layout keeps its instant files."""


class State(enum.IntEnum):
    """Ordered so that sorting puts an instant's files in lifecycle order."""

    REQUESTED = 0
    INFLIGHT = 1
    COMPLETED = 2


@dataclass(frozen=True, order=True)
class Instant:
    """``completion_time`` and ``layout`` take no part in comparisons: an instant is its
    requested time, action and state, on either layout."""

    timestamp: str
    action: str
    state: State
    completion_time: str | None = field(default=None, compare=False)
    """Layout 2's completion time of a completed instant (None on layout 1)."""
    layout: int = field(default=1, compare=False)

    @property
    def file_name(self) -> str:
        if self.layout == 2:
            return layout2_file_name(self.timestamp, self.action, self.state, self.completion_time)
        return instant_file_name(self.timestamp, self.action, self.state)

    @property
    def path(self) -> str:
        return f"{TIMELINE_FOLDERS[self.layout]}{self.file_name}"

    def with_state(self, state: State) -> Instant:
        """The same instant's file in a pending ``state``, on the same layout."""
        return Instant(self.timestamp, self.action, state, layout=self.layout)

    @property
    def completed_at(self) -> str:
        """When the instant completed: layout 2's completion time, else (layout 1, which
        records none) its requested time, by which layout 1 orders completions."""
        return self.completion_time or self.timestamp

    @property
    def is_completed(self) -> bool:
        return self.state is State.COMPLETED


def instant_file_name(timestamp: str, action: str, state: State) -> str:
    if state is State.COMPLETED:
        return f"{timestamp}.{completed_action(action)}"
    if state is State.INFLIGHT:
        return f"{timestamp}.inflight" if action == COMMIT else f"{timestamp}.{action}.inflight"
    return f"{timestamp}.{action}.requested"


def parse_instant_file_name(name: str) -> Instant | None:
    """The instant a ``.hoodie/`` file name denotes, or None for other files."""
    match = _FILE_NAME.fullmatch(name)
    if match is None:
        return None
    timestamp, rest = match.group("ts"), match.group("rest")
    if rest == "inflight":
        return Instant(timestamp, COMMIT, State.INFLIGHT)
    action, _, suffix = rest.partition(".")
    if action not in ACTIONS:
        return None
    if not suffix:
        return Instant(timestamp, action, State.COMPLETED)
    if suffix == "requested":
        return Instant(timestamp, action, State.REQUESTED)
    if suffix == "inflight":
        return Instant(timestamp, action, State.INFLIGHT)
    return None


def layout2_file_name(
    timestamp: str, action: str, state: State, completion_time: str | None
) -> str:
    if state is not State.COMPLETED:
        return instant_file_name(timestamp, action, state)
    if completion_time is None:
        raise InvalidArgumentError(
            f"completed instant {timestamp} needs a completion time on timeline layout 2",
            field="completion_time",
        )
    return f"{timestamp}_{completion_time}.{completed_action(action)}"


def parse_layout2_file_name(name: str) -> Instant | None:
    """The instant a ``.hoodie/timeline/`` file name denotes, or None for other files: a
    completed name must carry its completion time, a pending one must not."""
    match = _LAYOUT2_FILE_NAME.fullmatch(name)
    if match is None:
        return None
    timestamp, completed, rest = match.group("ts"), match.group("completed"), match.group("rest")
    action, _, suffix = rest.partition(".")
    if rest == "inflight":
        action, suffix = COMMIT, "inflight"
    if action not in LAYOUT2_ACTIONS or (completed is None) == (suffix == ""):
        return None
    states = {"": State.COMPLETED, "requested": State.REQUESTED, "inflight": State.INFLIGHT}
    if suffix not in states:
        return None
    return Instant(timestamp, action, states[suffix], completed, layout=2)


INSTANT_TIMES_KEPT = 256
"""Instant times ``validate_instant_time`` keeps checked: the few a service or writer is
working on. A stream adds about five a batch (its instant, the clean's, the services'
checks), so a cache of 4,096 kept growing for 800 batches (issue 47's driver memory)."""


@functools.lru_cache(maxsize=INSTANT_TIMES_KEPT)
def validate_instant_time(value: str, field: str = "instant") -> str:
    """Return ``value`` if it is a valid 17-digit instant time, else InvalidArgumentError.
    Cached: services check the same few instants on every call (errors are not cached)."""
    if not isinstance(value, str) or _INSTANT_TIME.fullmatch(value) is None:
        raise InvalidArgumentError(
            f"{value!r} is not an instant time (17 digits yyyyMMddHHmmssSSS)", field=field
        )
    try:
        datetime.strptime(value[:14], _SECONDS_FORMAT)
    except ValueError as error:
        raise InvalidArgumentError(f"{value!r} is not a valid date-time", field=field) from error
    return value


def is_instant_time(value: str) -> bool:
    """Whether ``value`` names an instant (e.g. a folder under ``.hoodie/.temp``)."""
    return _INSTANT_TIME.fullmatch(value) is not None


def validate_action(value: str, field: str = "action") -> str:
    if value not in ACTIONS:
        raise InvalidArgumentError(f"unknown timeline action {value!r}", field=field)
    return value


_issue_lock = threading.Lock()
_last_issued_ms = 0


def new_instant_time(after: str | None = None) -> str:
    """A fresh instant time, strictly greater than ``after`` and every earlier call here."""
    global _last_issued_ms
    floor_ms = _to_epoch_ms(validate_instant_time(after, field="after")) if after else 0
    with _issue_lock:
        chosen = max(time.time_ns() // 1_000_000, _last_issued_ms + 1, floor_ms + 1)
        _last_issued_ms = chosen
    return _from_epoch_ms(chosen)


def instant_time_ago(seconds: float) -> str:
    """The instant time ``seconds`` before now (to compare instants with a point in time)."""
    return _from_epoch_ms(time.time_ns() // 1_000_000 - int(seconds * 1000))


def instant_epoch_s(instant_time: str) -> float:
    """Seconds since the epoch of ``instant_time`` (UTC), to tell an instant's age."""
    return _to_epoch_ms(instant_time) / 1000


def _to_epoch_ms(instant_time: str) -> int:
    seconds = datetime.strptime(instant_time[:14], _SECONDS_FORMAT).replace(tzinfo=UTC)
    return int(seconds.timestamp()) * 1000 + int(instant_time[14:])


def _from_epoch_ms(epoch_ms: int) -> str:
    seconds = datetime.fromtimestamp(epoch_ms // 1000, tz=UTC).strftime(_SECONDS_FORMAT)
    return f"{seconds}{epoch_ms % 1000:03d}"
