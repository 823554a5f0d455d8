"""File slices of merge-on-read tables: a file group's latest base file and the log files
appended to it since, as Hudi's file-system view forms them.

Which slice a log file belongs to depends on the table version (hudi-facts §7). On version
6 a log file is named with its slice's base instant, and the deltacommit that wrote each
block is in the block's INSTANT_TIME header: a block counts once that deltacommit
completed (at or before ``as_of``) and no rollback command block of the file group names
it. On versions 8 and 9 a log file is named with the requested time of the deltacommit
that wrote it and counts once that deltacommit completed; it belongs to the slice with the
greatest base instant at or before the deltacommit's completion time. A log file named with
an instant newer than the latest committed base file (a pending compaction's, on version 6)
stays with the latest slice, so no committed update is left unread.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tidemark.storage.base import FileInfo
from tidemark.table.files.file_names import partition_of
from tidemark.table.logfiles.file_names import LogFileName, is_log_file_name, parse_log_file_name
from tidemark.table.logfiles.framing import BlockType, LogBlock

__all__ = ["LogFile", "committed_blocks", "log_files_in", "logs_of_slice"]

_DATA_BLOCKS = frozenset({BlockType.AVRO_DATA, BlockType.PARQUET_DATA, BlockType.DELETE})


@dataclass(frozen=True)
class LogFile:
    partition_path: str
    name: LogFileName
    path: str
    size: int

    @property
    def file_group(self) -> tuple[str, str]:
        return (self.partition_path, self.name.file_id)


def log_files_in(listing: Iterable[FileInfo]) -> list[LogFile]:
    """The log files among listed files (Hudi's own folders left out), in Hudi's order
    within each file group."""
    found = [
        LogFile(partition_of(info.path), parse_log_file_name(name), info.path, info.size)
        for info in listing
        if not info.path.startswith(".hoodie/")
        and is_log_file_name(name := info.path.rpartition("/")[2])
    ]
    return sorted(found, key=lambda log: (log.file_group, log.name.order_key))


def logs_of_slice(
    logs: Sequence[LogFile],
    base_instant: str | None,
    named_by_slice: bool,
    completed_at: Mapping[str, str],
) -> list[LogFile]:
    """The log files of one file group that its latest slice reads, in order.
    ``named_by_slice``: the table names logs by their slice's base instant (version 6,
    timeline layout 1). ``completed_at`` maps each deltacommit visible to the reader to its
    completion time."""
    if named_by_slice:
        return [log for log in logs if base_instant is None or log.name.instant >= base_instant]
    return [
        log
        for log in logs
        if log.name.instant in completed_at
        and (base_instant is None or completed_at[log.name.instant] >= base_instant)
    ]


def committed_blocks(
    blocks_by_file: Iterable[Sequence[LogBlock]], completed: Mapping[str, str]
) -> list[LogBlock]:
    """The data and delete blocks a reader merges, in the order written: blocks of
    deltacommits in ``completed``. A rolled-back deltacommit has left the timeline, so its
    blocks, and the command block naming it, drop out here too; corrupt blocks (a crashed
    append) are skipped, as Hudi's reader does."""
    return [
        block
        for blocks in blocks_by_file
        for block in blocks
        if block.block_type in _DATA_BLOCKS and block.instant in completed
    ]
