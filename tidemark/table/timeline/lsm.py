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

Written as Hudi's ``LSMTimelineWriter`` writes it (``append_history``): each archival
adds one level-0 file named by the requested times of its first and last instant, then
``manifest_<N+1>`` listing the current files and the new one, then ``_version_`` (the
switch readers follow). A crash before the switch leaves files no reader follows; the
next archival writes them again.

The levels are compacted and cleaned as ``LSMTimelineWriter.compactAndClean`` does after
each archival (``compact``): once a level holds ``hoodie.timeline.compaction.batch.size``
files (10), its oldest ones (at most that many, at most 1 GiB together) are rewritten
as one file of the next level, named by their first and last instants, and a new
manifest lists it instead of them; a compaction that fills the next level goes on down.
Then the manifests older than the newest three (plus one per level compacted in that
run) are deleted, and every history file none of the kept manifests lists (merged
files, and those of a killed archival or compaction). A reader that read ``_version_``
just before still finds its manifest and files.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tidemark import faults
from tidemark.errors import FailedPreconditionError, NotFoundError
from tidemark.storage.base import Storage
from tidemark.table.metadata.actions import DELTA_COMMIT, WRITE_ACTIONS
from tidemark.table.timeline.archived_writes import NO_WRITES, ArchivedWrites
from tidemark.table.timeline.parsed_files import ParsedFiles

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
AVRO_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieLSMTimelineInstant",
    "namespace": "org.apache.hudi.avro.model",
    "fields": [
        *(
            {"name": name, "type": ["null", kind], "default": None}
            for name, kind in (
                ("instantTime", "string"),
                ("completionTime", "string"),
                ("action", "string"),
                ("metadata", "bytes"),
                ("plan", "bytes"),
            )
        ),
        {"name": "version", "type": "int", "default": 1},
    ],
}
"""The same schema as Avro, kept in each file's footer as parquet-avro writes it."""
INSTANT_VERSION = 1
"""``LSMTimeline.LSM_TIMELINE_INSTANT_VERSION_1``."""
DEFAULT_COMPACTION_BATCH_SIZE = 10
"""``hoodie.timeline.compaction.batch.size``."""
COMPACTION_MAX_BYTES = 1024**3
"""``hoodie.timeline.compaction.target.file.max.bytes``: a compaction's input at most."""
RETAINED_MANIFESTS = 3
"""Manifest versions kept by the clean after a compaction (Hudi's)."""
COMPACTED_POINT = "lsm_compaction_before_switch"
"""Fault point: a compaction killed after writing its file, before its manifest."""

HISTORY_CACHE_FILES = 4096
"""History files whose completed writes are kept per process (``ArchivedWrites``): a writer
that opens its table each micro-batch parses only the files new since its last batch, not
the whole history (files are immutable; a compaction writes a new one under a new name)."""


@dataclass(frozen=True, slots=True)
class HistoryInstant:
    """One archived instant; ``metadata`` is its completed file's content and ``plan``
    its requested plan (a clean's, a clustering's), as Hudi's archiver keeps them."""

    timestamp: str
    completion_time: str
    action: str
    metadata: bytes | None = field(default=None, compare=False, repr=False)
    plan: bytes | None = field(default=None, compare=False, repr=False)


history_cache: ParsedFiles[ArchivedWrites] = ParsedFiles(HISTORY_CACHE_FILES)


def history_folder(properties: dict[str, str]) -> str:
    timeline = properties.get("hoodie.timeline.path", "timeline").strip("/ ") or "timeline"
    history = properties.get("hoodie.timeline.history.path", "history").strip("/ ") or "history"
    return f".hoodie/{timeline}/{history}"


def _completed_writes(instants: Sequence[HistoryInstant]) -> ArchivedWrites:
    """The writes among ``instants`` (a history lists completed instants only)."""
    return ArchivedWrites(
        frozenset(i.timestamp for i in instants if i.action in WRITE_ACTIONS),
        {i.timestamp: i.completion_time for i in instants if i.action == DELTA_COMMIT},
    )


class LsmTimeline:
    """The completed writes of a table's LSM history, read again only when the current
    manifest changes (one small read of ``_version_`` per ``completed_writes``)."""

    def __init__(self, storage: Storage, folder: str = ".hoodie/timeline/history") -> None:
        self.storage = storage
        self.folder = folder
        self._read_version: int | None = None
        self._writes = NO_WRITES

    def completed_writes(self) -> frozenset[str]:
        """Requested times of the commits, deltacommits and replacecommits the history
        lists."""
        return self._history_writes().writes

    def completed_deltacommits(self) -> dict[str, str]:
        """Requested time -> completion time of the deltacommits the history lists."""
        return dict(self._history_writes().deltacommits)

    def _history_writes(self) -> ArchivedWrites:
        version = self.current_version()
        if version is None:
            return NO_WRITES
        if version != self._read_version:
            entries = self.manifest_entries(version)
            history_cache.retain(self.storage.uri, [self._path(entry) for entry in entries])
            self._writes = ArchivedWrites.union(self._listed_file(entry) for entry in entries)
            self._read_version = version
        return self._writes

    def instants(self) -> tuple[HistoryInstant, ...]:
        """Every archived instant (all of them completed), oldest requested time first,
        read from the files each call (the history listing's)."""
        version = self.current_version()
        if version is None:
            return ()
        paths = [self._path(entry) for entry in self.manifest_entries(version)]
        found = [instant for path in paths for instant in self._read_file(path)]
        return tuple(sorted(found, key=lambda i: (i.timestamp, i.action)))

    def newest_file_instants(self, after: str) -> tuple[HistoryInstant, ...]:
        """The instants of the current file whose last instant is the newest, when that
        instant is not before ``after`` (else none: the manifest alone is read). Those
        of an interrupted archival are still on the active timeline, which then starts
        at or before it."""
        version = self.current_version()
        names = self.manifest_files(version) if version is not None else []
        newest = max(names, key=lambda n: tuple(reversed(n.split("_")[:2])), default=None)
        if newest is None or newest.split("_")[1] < after:
            return ()
        return tuple(self._read_file(f"{self.folder}/{newest}"))

    def current_version(self) -> int | None:
        """The snapshot version readers follow (None: no history)."""
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

    def manifest_entries(self, version: int) -> list[dict[str, Any]]:
        """The ``files`` entries (``fileName``, ``fileLen``) of ``manifest_<version>``."""
        path = f"{self.folder}/manifest_{version}"
        try:
            data = json.loads(self.storage.read(path) or b"{}")
            entries = list(data.get("files", []))
            names = [entry["fileName"] for entry in entries]
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise _unreadable(path, f"not a manifest ({error})") from error
        for name in names:
            if not isinstance(name, str) or not LSM_FILE.fullmatch(name):
                raise _unreadable(path, f"{name!r} is not an LSM timeline file name")
        return entries

    def manifest_files(self, version: int) -> list[str]:
        return [entry["fileName"] for entry in self.manifest_entries(version)]

    def _path(self, entry: dict[str, Any]) -> str:
        return f"{self.folder}/{entry['fileName']}"

    def _listed_file(self, entry: dict[str, Any]) -> ArchivedWrites:
        """The writes of a manifest's file, parsed once per process (``history_cache``)
        when the manifest gives its length."""
        path, length = self._path(entry), entry.get("fileLen")
        if not isinstance(length, int):
            return _completed_writes(self._read_file(path))
        return history_cache.read(
            (self.storage.uri, path, length), lambda: _completed_writes(self._read_file(path))
        )

    def _read_file(self, path: str) -> list[HistoryInstant]:
        return self._read_rows(path, COLUMNS)

    def read_whole(self, path: str) -> list[HistoryInstant]:
        """The instants of one history file with their metadata and plans."""
        return self._read_rows(path, [*COLUMNS, "metadata", "plan"])

    def _read_rows(self, path: str, columns: list[str]) -> list[HistoryInstant]:
        try:
            with self.storage.open_input(path) as stream:
                rows = pq.read_table(stream, columns=columns).to_pylist()
        except (pa.ArrowInvalid, OSError, KeyError) as error:
            raise _unreadable(path, str(error)) from error
        instants = []
        for row in rows:
            if not row["instantTime"] or not row["completionTime"] or not row["action"]:
                raise _unreadable(path, "a row lacks instantTime, completionTime or action")
            instants.append(
                HistoryInstant(
                    row["instantTime"],
                    row["completionTime"],
                    row["action"],
                    metadata=row.get("metadata"),
                    plan=row.get("plan"),
                )
            )
        return instants


def write_history(storage: Storage, folder: str, instants: Sequence[HistoryInstant]) -> str:
    """A history holding ``instants`` in ``folder`` (empty before: the upgrade's)."""
    return append_history(LsmTimeline(storage, folder), instants)


def append_history(history: LsmTimeline, instants: Sequence[HistoryInstant]) -> str:
    """Add ``instants`` to the history in one new level-0 file, as Hudi's archiver does:
    the Parquet file, then the next manifest listing it with every current file, then
    ``_version_`` pointing at that manifest, each written whole. Returns the file's
    name. A file the current manifest already lists is not written again (an archival
    that got that far only left its active files to delete)."""
    ordered = sorted(instants, key=lambda i: (i.timestamp, i.action))
    name = f"{ordered[0].timestamp}_{ordered[-1].timestamp}_0.parquet"
    version = history.current_version() or 0
    entries = history.manifest_entries(version) if version else []
    if any(entry["fileName"] == name for entry in entries):
        return name
    data = _parquet(ordered)
    history.storage.write(f"{history.folder}/{name}", data)
    _switch(history, version, [*entries, {"fileName": name, "fileLen": len(data)}])
    return name


def _switch(history: LsmTimeline, version: int, entries: list[dict[str, Any]]) -> None:
    """Write ``manifest_<version + 1>`` of ``entries``, then point ``_version_`` at it."""
    storage, folder = history.storage, history.folder
    manifest = json.dumps({"files": entries}, indent=2).encode()
    storage.write(f"{folder}/manifest_{version + 1}", manifest)
    storage.write(f"{folder}/{VERSION_FILE}", str(version + 1).encode())


def compact(history: LsmTimeline, batch_size: int = DEFAULT_COMPACTION_BATCH_SIZE) -> list[str]:
    """Compact the levels from 0 down while one holds ``batch_size`` files, then clean
    old manifests and unlisted files; returns the files written."""
    written: list[str] = []
    while (name := _compact_level(history, len(written), batch_size)) is not None:
        written.append(name)
    _clean(history, RETAINED_MANIFESTS + len(written))
    return written


def _compact_level(history: LsmTimeline, level: int, batch_size: int) -> str | None:
    """Merge the oldest files of ``level`` into one of the next, as Hudi chooses them."""
    version = history.current_version()
    if version is None:
        return None
    entries = history.manifest_entries(version)
    files = sorted(
        (e for e in entries if _level(e["fileName"]) == level), key=lambda e: e["fileName"]
    )
    if len(files) < batch_size:
        return None
    chosen: list[dict[str, Any]] = []
    for entry in files[:batch_size]:
        if chosen and sum(e["fileLen"] for e in chosen) + entry["fileLen"] > COMPACTION_MAX_BYTES:
            break
        chosen.append(entry)
    if len(chosen) < 2:
        return None
    names = [e["fileName"] for e in chosen]
    first, last = min(n.split("_")[0] for n in names), max(n.split("_")[1] for n in names)
    name = f"{first}_{last}_{level + 1}.parquet"
    data = _parquet([i for n in names for i in history.read_whole(f"{history.folder}/{n}")])
    history.storage.write(f"{history.folder}/{name}", data)
    faults.exit_if_requested(COMPACTED_POINT)
    kept = [e for e in entries if e["fileName"] not in names]
    _switch(history, version, [*kept, {"fileName": name, "fileLen": len(data)}])
    return name


def _level(name: str) -> int:
    return int(name.removesuffix(".parquet").rpartition("_")[2])


def _clean(history: LsmTimeline, keep: int) -> None:
    """Delete the manifests older than the newest ``keep``, then the history files none
    of the kept ones lists (``LSMTimelineWriter.clean``)."""
    storage, folder = history.storage, history.folder
    listed = [info.path.rpartition("/")[2] for info in storage.list_dir(folder).files]
    versions = sorted(
        (int(match.group(1)) for n in listed if (match := MANIFEST.fullmatch(n))), reverse=True
    )
    if len(versions) <= keep:
        return
    kept = versions[:keep]
    wanted = {name for version in kept for name in history.manifest_files(version)}
    storage.delete_many(f"{folder}/manifest_{v}" for v in versions[keep:])
    storage.delete_many(
        f"{folder}/{n}" for n in listed if LSM_FILE.fullmatch(n) and n not in wanted
    )


def _parquet(instants: Sequence[HistoryInstant]) -> bytes:
    rows = pa.Table.from_pylist(
        [
            {
                "instantTime": i.timestamp,
                "completionTime": i.completion_time,
                "action": i.action,
                "metadata": i.metadata,
                "plan": i.plan,
                "version": INSTANT_VERSION,
            }
            for i in instants
        ],
        schema=FILE_SCHEMA.with_metadata({"parquet.avro.schema": json.dumps(AVRO_SCHEMA)}),
    )
    sink = pa.BufferOutputStream()
    pq.write_table(rows, sink)
    return bytes(sink.getvalue().to_pybytes())


def _unreadable(path: str, reason: str) -> FailedPreconditionError:
    return FailedPreconditionError(
        f"cannot read Hudi's LSM timeline file {path}: {reason}", field="table"
    )
