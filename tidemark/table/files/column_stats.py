"""Column statistics of base files: per file, the min, max and null count of every top-level
orderable column, the way Hudi's column-stats index keeps them, so a read skips files no
row of which can match its filters without opening them.

They live in ``.hoodie/.tidemark/column-stats/<instant>.parquet``, one Parquet file per
completed write (commit or replacecommit), one row per base file that write created:
``file`` (its table-relative path), ``rows``, and for each column ``c`` the columns
``c.min`` and ``c.max`` (of ``c``'s type; null when unknown) and ``c.nulls``. A write
records its file before it completes (``complete_commit``), so every completed instant
has one; a rollback deletes its instant's; files of replaced or older file groups are
simply never asked about. Entries come from the Parquet footers (row-group statistics
folded per file), so ``rebuild`` recreates them for any table, Hudi-written ones
included. A file without an entry is never skipped.

So that their count follows the active timeline, not the table's age, archival folds the
files of the writes it archives into one, ``archived.parquet`` (``fold``): their entries
join those already folded, less the files the archived cleans deleted, and only then are
their own files deleted. An instant without its own file is looked up there.

What they rule out is ``tidemark.table.filters.statistics``'s to say (floating-point
columns are left out: NaN).
"""

from __future__ import annotations

import io
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import structlog

from tidemark.errors import NotFoundError
from tidemark.storage.base import Storage
from tidemark.table.files.view import BaseFile
from tidemark.table.filters.expression import BoundFilter
from tidemark.table.filters.statistics import ColumnStats, FileStats, may_match, orderable

STATS_DIR = ".hoodie/.tidemark/column-stats"
FOLDED = f"{STATS_DIR}/archived.parquet"
"""The entries of archived writes' files, folded at each archival."""
FOOTER_READERS = 16
"""Footers read in parallel: a write of thousands of files costs one request per file."""

log = structlog.get_logger(__name__)


def stats_path(instant: str) -> str:
    return f"{STATS_DIR}/{instant}.parquet"


def footer_stats(metadata: pq.FileMetaData) -> FileStats:
    """Row-group statistics of one file folded per top-level orderable column."""
    schema = metadata.schema.to_arrow_schema()
    index = {metadata.schema.column(i).path: i for i in range(metadata.num_columns)}
    columns: dict[str, ColumnStats] = {}
    for field in schema:
        if orderable(field.type) and field.name in index:
            columns[field.name] = _fold(metadata, index[field.name])
    return FileStats(metadata.num_rows, columns)


def row_group_stats(metadata: pq.FileMetaData, row_group: int, columns: list[str]) -> FileStats:
    """The statistics of one row group's top-level ``columns`` (those it has)."""
    group = metadata.row_group(row_group)
    found: dict[str, ColumnStats] = {}
    for index in range(metadata.num_columns):
        name = metadata.schema.column(index).path
        stats = group.column(index).statistics if name in columns else None
        if stats is not None:
            low, high = (stats.min, stats.max) if stats.has_min_max else (None, None)
            nulls = stats.null_count if stats.has_null_count else None
            found[name] = ColumnStats(low, high, nulls)
    return FileStats(group.num_rows, found)


def _fold(metadata: pq.FileMetaData, column: int) -> ColumnStats:
    lows: list[Any] = []
    highs: list[Any] = []
    nulls: int | None = 0
    known = True
    for rg in range(metadata.num_row_groups):
        chunk = metadata.row_group(rg).column(column)
        stats = chunk.statistics
        if stats is None:
            return ColumnStats(None, None, None)
        if stats.has_null_count and nulls is not None:
            nulls += stats.null_count
        else:
            nulls = None
        if stats.has_min_max:
            lows.append(stats.min)
            highs.append(stats.max)
        elif not (stats.has_null_count and stats.null_count == metadata.row_group(rg).num_rows):
            known = False  # values without bounds
    if not known or not lows:
        return ColumnStats(None, None, nulls)
    try:
        return ColumnStats(min(lows), max(highs), nulls)
    except TypeError:
        return ColumnStats(None, None, nulls)


def record(storage: Storage, instant: str, paths: Sequence[str]) -> None:
    """Write the stats file of ``instant`` for its base files ``paths`` (read from their
    footers). Statistics only speed reads up: a failure is logged, never raised, and
    leaves the files without entries (read whole)."""
    try:
        with ThreadPoolExecutor(FOOTER_READERS) as pool:
            stats = list(pool.map(lambda path: _read_footer(storage, path), paths))
        storage.write(stats_path(instant), _encode(dict(zip(paths, stats, strict=True))))
    except Exception as error:
        log.warning("column_stats.not_recorded", instant=instant, error=str(error))


def delete(storage: Storage, instant: str) -> None:
    """Forget the stats of ``instant`` (rolled back: its files are gone)."""
    storage.delete(stats_path(instant))


def rebuild(storage: Storage, files: Sequence[BaseFile]) -> int:
    """Rewrite the stats files of the instants that wrote ``files`` (a snapshot's live
    base files) from their footers, and delete every other stats file; returns how many
    files have entries."""
    by_instant: dict[str, list[str]] = defaultdict(list)
    for base in files:
        by_instant[base.instant].append(base.path)
    for instant, paths in sorted(by_instant.items()):
        record(storage, instant, paths)
    wanted = {stats_path(instant) for instant in by_instant}
    stale = [info.path for info in storage.list_dir(STATS_DIR).files if info.path not in wanted]
    storage.delete_many(stale)
    return len(files)


def load(storage: Storage, files: Iterable[BaseFile]) -> dict[str, FileStats]:
    """Stats of ``files`` by path, read from the stats files of the instants that wrote
    them, or from ``FOLDED`` for instants without one; files without an entry are absent."""
    wanted: dict[str, set[str]] = defaultdict(set)
    for base in files:
        wanted[base.instant].add(base.path)
    with ThreadPoolExecutor(FOOTER_READERS) as pool:
        found = pool.map(
            lambda item: (item[1], _entries(storage, stats_path(item[0]), item[1])), wanted.items()
        )
        parts = list(found)
    result: dict[str, FileStats] = {}
    unrecorded: set[str] = set()
    for paths, part in parts:
        if part is None:
            unrecorded |= paths
        else:
            result.update(part)
    if unrecorded:
        result.update(_entries(storage, FOLDED, unrecorded) or {})
    return result


def recorded_instants(storage: Storage) -> list[str]:
    """Instants with their own stats file (not yet folded), oldest first."""
    names = (info.path.rpartition("/")[2] for info in storage.list_dir(STATS_DIR).files)
    return sorted(n.removesuffix(".parquet") for n in names if n != FOLDED.rpartition("/")[2])


def fold(storage: Storage, instants: Sequence[str], deleted: Iterable[str]) -> None:
    """Fold the stats files of the archived writes ``instants`` into ``FOLDED``, leaving
    out the files ``deleted`` (by the archived cleans), then delete their own files.
    ``FOLDED`` is written whole first, so a kill in between leaves entries in both
    places, never in neither."""
    if not instants:
        return
    entries = _entries(storage, FOLDED, None) or {}
    for instant in instants:
        entries.update(_entries(storage, stats_path(instant), None) or {})
    for path in deleted:
        entries.pop(path, None)
    if entries:
        storage.write(FOLDED, _encode(entries))
    else:
        storage.delete(FOLDED)
    storage.delete_many(stats_path(instant) for instant in instants)


def may_hold(storage: Storage, files: list[BaseFile], bound: BoundFilter) -> list[BaseFile]:
    """``files`` without those whose statistics prove no row meets ``bound``."""
    if not bound:
        return files
    found = load(storage, files)
    return [f for f in files if f.path not in found or may_match(bound, found[f.path])]


def _entries(storage: Storage, path: str, paths: set[str] | None) -> dict[str, FileStats] | None:
    """The entries of the stats file ``path`` (of ``paths`` only, unless None); None
    when it does not exist."""
    try:
        table = pq.read_table(io.BytesIO(storage.read(path)))
    except NotFoundError:
        return None
    except (pa.ArrowInvalid, OSError) as error:  # a damaged stats file: read files whole
        log.warning("column_stats.unreadable", path=path, error=str(error))
        return {}
    return {p: stats for p, stats in _decode(table).items() if paths is None or p in paths}


def _read_footer(storage: Storage, path: str) -> FileStats:
    with storage.open_input(path) as stream, pq.ParquetFile(stream) as parquet:
        return footer_stats(parquet.metadata)


def _encode(stats: Mapping[str, FileStats]) -> bytes:
    paths = list(stats)
    arrays: dict[str, pa.Array] = {
        "file": pa.array(paths, pa.string()),
        "rows": pa.array([stats[p].rows for p in paths], pa.int64()),
    }
    names = dict.fromkeys(name for s in stats.values() for name in s.columns)
    for name in names:
        entries = [stats[p].columns.get(name, ColumnStats(None, None, None)) for p in paths]
        bounds = _bounds(entries)
        if bounds is None:
            continue
        arrays[f"{name}.min"], arrays[f"{name}.max"] = bounds
        arrays[f"{name}.nulls"] = pa.array([e.nulls for e in entries], pa.int64())
    sink = io.BytesIO()
    pq.write_table(pa.table(arrays), sink)
    return sink.getvalue()


def _bounds(entries: list[ColumnStats]) -> tuple[pa.Array, pa.Array] | None:
    """Min and max arrays of one column (types inferred from the values); None when
    the files disagree on its type."""
    try:
        lows = pa.array([e.low for e in entries])
        highs = pa.array([e.high for e in entries], type=lows.type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        return None
    return lows, highs


def _decode(table: pa.Table) -> dict[str, FileStats]:
    names = [n.removesuffix(".min") for n in table.column_names if n.endswith(".min")]
    rows = table.to_pylist()
    return {
        row["file"]: FileStats(
            row["rows"],
            {n: ColumnStats(row[f"{n}.min"], row[f"{n}.max"], row[f"{n}.nulls"]) for n in names},
        )
        for row in rows
    }
