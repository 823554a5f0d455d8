"""Undoing a failed deltacommit's log appends, as Hudi's rollback does per table version.

On versions 8 and 9 a deltacommit names its log files with its own requested time, so its
rollback deletes them like its base files (found by the instant in their names). On version
6 a log file carries its slice's base instant and may hold appends of several writes, so
Hudi leaves the failed log files in place and appends to each slice the failed write
touched a rollback command block (TARGET_INSTANT_TIME the failed instant, INSTANT_TIME the
rollback's) as a new log version written with the unknown write token ``1-0-1``; readers
then drop the target's blocks. Which slices those are, the failed write's markers say: each
names a log file it was appending (an APPEND marker on version 6).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tidemark.errors import AlreadyExistsError
from tidemark.storage.base import FileInfo, Storage
from tidemark.table.files.file_names import join_path, partition_of
from tidemark.table.logfiles.command_blocks import rollback_block
from tidemark.table.logfiles.file_names import (
    ROLLBACK_WRITE_TOKEN,
    is_log_file_name,
    next_log_file_name,
    parse_log_file_name,
)
from tidemark.table.logfiles.framing import write_log_file

__all__ = ["UNPUBLISHED", "SliceToUndo", "slices_to_undo", "write_rollback_blocks"]

UNPUBLISHED = -1
"""The size Hudi's marker-based rollback plan gives a log file of unknown size: here one a
marker names that a task of the failed write has not published (yet)."""
_NAMED_BY_SLICE = 6
"""The table version whose log files are named by their slice's base instant."""


@dataclass(frozen=True)
class SliceToUndo:
    """A file slice the failed write appended to: its failed log files (table-relative
    path to size, ``UNPUBLISHED`` for one not in storage)."""

    partition_path: str
    file_id: str
    base_instant: str
    failed_logs: dict[str, int]


def slices_to_undo(
    table_version: int, instant: str, marked: Iterable[str], listing: Sequence[FileInfo]
) -> list[SliceToUndo]:
    """The slices the rollback of deltacommit ``instant`` appends a command block to: on
    version 6, those of the log files its markers name (``marked``: table-relative paths),
    except logs named with ``instant`` itself (a file group it started, deleted like its
    base files); none on versions 8 and 9, which delete the failed log files."""
    if table_version > _NAMED_BY_SLICE:
        return []
    sizes = {info.path: info.size for info in listing}
    slices: dict[tuple[str, str, str], SliceToUndo] = {}
    for path in sorted(marked):
        name = path.rpartition("/")[2]
        if not is_log_file_name(name):
            continue
        parsed = parse_log_file_name(name)
        if parsed.instant == instant:
            continue
        key = (partition_of(path), parsed.file_id, parsed.instant)
        undo = slices.setdefault(key, SliceToUndo(*key, failed_logs={}))
        undo.failed_logs[path] = sizes.get(path, UNPUBLISHED)
    return list(slices.values())


def write_rollback_blocks(
    storage: Storage,
    slices: Iterable[SliceToUndo],
    rollback_instant: str,
    target: str,
    listing: Sequence[FileInfo],
) -> dict[str, int]:
    """Append a rollback command block for ``target`` to each slice, as the slice's next
    log version; the new log files (table-relative path to size)."""
    paths = {info.path for info in listing}
    written: dict[str, int] = {}
    for undo in slices:
        in_partition = [path for path in paths if partition_of(path) == undo.partition_path]
        while True:
            name = next_log_file_name(
                in_partition, undo.file_id, undo.base_instant, ROLLBACK_WRITE_TOKEN
            ).name
            path = join_path(undo.partition_path, name)
            try:
                written[path] = write_log_file(
                    storage, path, [rollback_block(rollback_instant, target)]
                )
                break
            except AlreadyExistsError:
                in_partition.append(path)  # published since the listing: the next version
    return written
