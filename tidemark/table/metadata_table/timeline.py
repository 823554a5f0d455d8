"""The metadata table's own timeline (``.hoodie/metadata/.hoodie/timeline/``, layout 2 on
table versions 8 and 9) and the ``files`` partition's folder: which instants it holds,
when each completed, and the paths of their files."""

from __future__ import annotations

from tidemark.storage.base import Storage
from tidemark.table.metadata.actions import COMMIT
from tidemark.table.metadata_table.partitions import FILES, METADATA_FOLDER
from tidemark.table.timeline.instant import TIMELINE_FOLDERS, Instant, parse_layout2_file_name

__all__ = [
    "FOLDER",
    "TIMELINE",
    "completion_times",
    "instant_path",
    "instants_at",
    "last_compaction",
    "latest_time",
    "metadata_timeline",
]

TIMELINE = f"{METADATA_FOLDER}{TIMELINE_FOLDERS[2]}"
FOLDER = f"{METADATA_FOLDER}{FILES}/"


def metadata_timeline(storage: Storage) -> list[Instant]:
    """Every instant file of the metadata timeline (each state its own entry)."""
    return [
        instant
        for info in storage.list_dir(TIMELINE).files
        for instant in [parse_layout2_file_name(info.path[len(TIMELINE) :])]
        if instant is not None
    ]


def instants_at(storage: Storage, timestamp: str) -> list[Instant]:
    """The metadata timeline's files of the instant at ``timestamp`` (every state)."""
    return [instant for instant in metadata_timeline(storage) if instant.timestamp == timestamp]


def completion_times(timeline: list[Instant]) -> dict[str, str]:
    """Completed instant time -> its completion time."""
    return {i.timestamp: i.completed_at for i in timeline if i.is_completed}


def latest_time(timeline: list[Instant]) -> str | None:
    """The latest requested or completion time on the timeline."""
    times = [t for i in timeline for t in (i.timestamp, i.completion_time) if t]
    return max(times) if times else None


def last_compaction(storage: Storage) -> str | None:
    """The requested time of the metadata table's latest completed compaction (a
    ``commit`` on its timeline), or None: Hudi archives no data instant after it, since
    its reader trusts only the compacted metadata of instants gone from the data's active
    timeline."""
    timeline = metadata_timeline(storage)
    done = [i.timestamp for i in timeline if i.is_completed and i.action == COMMIT]
    return max(done) if done else None


def instant_path(instant: Instant) -> str:
    """The table-relative path of one of the metadata timeline's instant files."""
    return f"{METADATA_FOLDER}{instant.path}"
