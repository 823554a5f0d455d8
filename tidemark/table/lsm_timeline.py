"""Hudi 1.x's LSM timeline (table versions 8 and 9): the instants archived off the active
timeline, read so that a base file older than the active timeline counts as committed
only when the history says its write completed (as ``archived_timeline`` does for 6).

Layout (``.hoodie/<hoodie.timeline.path>/<hoodie.timeline.history.path>``, by default
``.hoodie/timeline/history``), per the Hudi 1.0 tech spec and ``LSMTimeline``:

    _version_                       the current snapshot version N, UTF-8 digits
    manifest_<N>                    JSON ``{"files": [{"fileName": ..., "fileLen": ...}]}``:
                                    the Parquet files of snapshot N
    <min>_<max>_<level>.parquet     HoodieLSMTimelineInstant rows: instantTime (requested),
                                    completionTime, action, metadata, plan, ...

Only the files the current manifest lists are read: a compaction of the tree leaves the
files it merged behind until Hudi cleans them, and they would list instants twice. Without
``_version_`` the highest manifest is current (Hudi's own fallback). Anything that cannot
be read is an error naming the file: guessing would hide committed rows or show
uncommitted ones.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from tidemark.errors import FailedPreconditionError, NotFoundError
from tidemark.storage.base import Storage
from tidemark.table.archived_timeline import COW_WRITE_ACTIONS

VERSION_FILE = "_version_"
MANIFEST = re.compile(r"manifest_(\d+)")
LSM_FILE = re.compile(r"\d+_\d+_\d+\.parquet")
COLUMNS = ["instantTime", "completionTime", "action"]
FILE_SCHEMA = pa.schema(
    [
        pa.field("instantTime", pa.string()),
        pa.field("completionTime", pa.string()),
        pa.field("action", pa.string()),
        pa.field("metadata", pa.binary()),
        pa.field("plan", pa.binary()),
        pa.field("version", pa.int32(), nullable=False),
    ]
)
"""``HoodieLSMTimelineInstant.avsc`` as Parquet columns."""


@dataclass(frozen=True)
class HistoryInstant:
    timestamp: str
    completion_time: str
    action: str


def history_folder(properties: dict[str, str]) -> str:
    timeline = properties.get("hoodie.timeline.path", "timeline").strip("/ ") or "timeline"
    history = properties.get("hoodie.timeline.history.path", "history").strip("/ ") or "history"
    return f".hoodie/{timeline}/{history}"


class LsmTimeline:
    """The completed writes of a table's LSM history, read again only when the current
    manifest changes (one small read of ``_version_`` per ``completed_writes``)."""

    def __init__(self, storage: Storage, folder: str = ".hoodie/timeline/history") -> None:
        self.storage = storage
        self.folder = folder
        self._read_version: int | None = None
        self._instants: tuple[HistoryInstant, ...] = ()

    def completed_writes(self) -> frozenset[str]:
        """Requested times of the commits and replacecommits the history lists."""
        return frozenset(i.timestamp for i in self.instants() if i.action in COW_WRITE_ACTIONS)

    def instants(self) -> tuple[HistoryInstant, ...]:
        """Every archived instant (all of them completed), oldest requested time first."""
        version = self._current_version()
        if version is None:
            return ()
        if version != self._read_version:
            found: list[HistoryInstant] = []
            for name in self._manifest_files(version):
                found += self._read_file(f"{self.folder}/{name}")
            self._instants = tuple(sorted(found, key=lambda i: (i.timestamp, i.action)))
            self._read_version = version
        return self._instants

    def _current_version(self) -> int | None:
        try:
            text = self.storage.read(f"{self.folder}/{VERSION_FILE}").decode("utf-8").strip()
        except NotFoundError:
            versions = [
                int(match.group(1))
                for info in self.storage.list_dir(self.folder).files
                if (match := MANIFEST.fullmatch(info.path.rpartition("/")[2]))
            ]
            return max(versions) if versions else None
        if not text.isdigit():
            raise _unreadable(f"{self.folder}/{VERSION_FILE}", f"{text!r} is not a version")
        return int(text)

    def _manifest_files(self, version: int) -> list[str]:
        path = f"{self.folder}/manifest_{version}"
        try:
            data = json.loads(self.storage.read(path) or b"{}")
            names = [entry["fileName"] for entry in data.get("files", [])]
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise _unreadable(path, f"not a manifest ({error})") from error
        for name in names:
            if not isinstance(name, str) or not LSM_FILE.fullmatch(name):
                raise _unreadable(path, f"{name!r} is not an LSM timeline file name")
        return names

    def _read_file(self, path: str) -> list[HistoryInstant]:
        try:
            with self.storage.open_input(path) as stream:
                rows = pq.read_table(stream, columns=COLUMNS).to_pylist()
        except (pa.ArrowInvalid, OSError, KeyError) as error:
            raise _unreadable(path, str(error)) from error
        instants = []
        for row in rows:
            if not row["instantTime"] or not row["completionTime"] or not row["action"]:
                raise _unreadable(path, "a row lacks instantTime, completionTime or action")
            instants.append(
                HistoryInstant(row["instantTime"], row["completionTime"], row["action"])
            )
        return instants


def write_history(storage: Storage, folder: str, instants: Sequence[HistoryInstant]) -> str:
    """A new history holding ``instants`` in one level-0 file, as Hudi's archiver lays
    it out: the Parquet file, then ``manifest_1`` listing it, then ``_version_`` (the
    switch readers follow), each written whole. Returns the file's name. The instants'
    metadata and plans are not carried (null)."""
    ordered = sorted(instants, key=lambda i: (i.timestamp, i.action))
    name = f"{ordered[0].timestamp}_{max(i.completion_time for i in ordered)}_0.parquet"
    rows = pa.Table.from_pylist(
        [
            {
                "instantTime": i.timestamp,
                "completionTime": i.completion_time,
                "action": i.action,
                "metadata": None,
                "plan": None,
                "version": 1,
            }
            for i in ordered
        ],
        schema=FILE_SCHEMA,
    )
    sink = pa.BufferOutputStream()
    pq.write_table(rows, sink)
    data = sink.getvalue().to_pybytes()
    storage.write(f"{folder}/{name}", data)
    manifest = {"files": [{"fileName": name, "fileLen": len(data)}]}
    storage.write(f"{folder}/manifest_1", json.dumps(manifest, indent=2).encode())
    storage.write(f"{folder}/{VERSION_FILE}", b"1")
    return name


def _unreadable(path: str, reason: str) -> FailedPreconditionError:
    return FailedPreconditionError(
        f"cannot read Hudi's LSM timeline file {path}: {reason}", field="table"
    )
