"""The active timeline of timeline layout 2 (table versions 8 and 9), read-only for now.

Instants live under ``.hoodie/timeline/``: ``<requested>.<action>.requested``,
``<requested>.<action>.inflight`` (a commit's is ``<requested>.inflight``) and, once done,
``<requested>_<completion>.<action>``. Every instant's metadata is Avro. Tidemark reads
these tables; every state change is refused (FAILED_PRECONDITION naming the table version)
before it touches storage, so no Tidemark writer can leave a layout-1 instant, or a
half-made layout-2 one, on a 1.x timeline.
"""

from __future__ import annotations

from tidemark.errors import FailedPreconditionError
from tidemark.storage.base import Storage
from tidemark.storage.damaged import read_parsed
from tidemark.table.commit_metadata import CommitMetadata
from tidemark.table.commit_metadata_avro import commit_metadata_from_avro
from tidemark.table.instant import TIMELINE_FOLDERS, Instant, parse_layout2_file_name
from tidemark.table.timeline import WRITE_ACTIONS, Timeline

TIMELINE_DIR = TIMELINE_FOLDERS[2]


class LayoutTwoTimeline(Timeline):
    """A snapshot of a layout-2 timeline; ``version`` is the table version (8 or 9)."""

    def __init__(self, storage: Storage, version: int) -> None:
        self.version = version
        super().__init__(storage)

    def reload(self) -> None:
        """One instant per requested time (Hudi never reuses one across actions), in its
        latest state: a clustering's ``clustering`` files give way to its completed
        ``replacecommit``."""
        latest: dict[str, Instant] = {}
        for info in self.storage.list_dir(TIMELINE_DIR).files:
            instant = parse_layout2_file_name(info.path[len(TIMELINE_DIR) :])
            if instant is None:
                continue
            known = latest.get(instant.timestamp)
            if known is None or known.state < instant.state:
                latest[instant.timestamp] = instant
        self._instants = sorted(latest.values())

    def last_completed(self, actions: frozenset[str] | None = WRITE_ACTIONS) -> Instant | None:
        """The instant that completed last: the table's state is the one it left."""
        done = self.completed(actions)
        return max(done, key=lambda i: i.completed_at) if done else None

    def read_metadata(self, instant: Instant) -> CommitMetadata:
        if not instant.is_completed or instant.action not in WRITE_ACTIONS:
            raise FailedPreconditionError(
                f"{instant.file_name} is not a completed commit or replacecommit",
                field="instant",
            )
        return read_parsed(self.storage, instant.path, commit_metadata_from_avro)

    def create_requested(self, timestamp: str, action: str, payload: bytes = b"") -> Instant:
        raise self._read_only()

    def transition_inflight(self, timestamp: str, action: str, payload: bytes = b"") -> Instant:
        raise self._read_only()

    def complete(self, timestamp: str, action: str, metadata: bytes) -> Instant:
        raise self._read_only()

    def delete_pending(self, instant: Instant) -> None:
        raise self._read_only()

    def revert_to_requested(self, instant: Instant) -> None:
        raise self._read_only()

    def _read_only(self) -> FailedPreconditionError:
        return write_refusal(self.version)


def write_refusal(version: int) -> FailedPreconditionError:
    """The one-line refusal of a write to a table version Tidemark only reads."""
    return FailedPreconditionError(
        f"value '{version}' is not supported for writes (Tidemark reads table versions "
        "8 and 9 and writes version 6 only)",
        field="hoodie.table.version",
    )
