"""A data instant's metadata deltacommit, as Hudi 1.x writes it on table versions 8 and 9:
at the data instant's own time T, ``T.deltacommit.requested`` (empty), ``.inflight``
(an empty commit) and, after one log file ``.<fileId>_<T>.log.1_<token>`` in the ``files``
partition holding one ``HFILE_DATA`` block of the instant's records, the completed
``T_<completion>.deltacommit`` naming that log file. It completes before the data instant
does; Hudi's readers skip metadata of an instant not completed on the data timeline, so a
crash in between leaves the table as it was until the data instant's rollback removes the
metadata deltacommit too (``roll_back``).

The ``HoodieMetadataRecord`` schema, the HFile layout (Hudi 1.0's or 1.1's) and codec are
the table's own, read from the newest HFile of its ``files`` partition (a log block), so
the new block looks like the ones its Hudi writer made; the file group id is read from
the folder (``files-0000-0`` on Hudi 1.x)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import structlog

from tidemark.errors import FailedPreconditionError
from tidemark.hfile.reader import HFileReader
from tidemark.hfile.style import WriteOptions
from tidemark.hfile.writer import write_hfile
from tidemark.storage.base import Storage
from tidemark.table.logfiles.file_names import (
    is_log_file_name,
    log_file_name,
    parse_log_file_name,
)
from tidemark.table.logfiles.framing import (
    BlockType,
    HeaderKey,
    LogBlock,
    encode_block,
    read_blocks,
)
from tidemark.table.metadata.actions import DELTA_COMMIT
from tidemark.table.metadata.commit import CommitMetadata, WriteStat
from tidemark.table.metadata.commit_avro import commit_metadata_to_avro
from tidemark.table.metadata_table.files_records import FileChanges, encode_records
from tidemark.table.metadata_table.partitions import FILES
from tidemark.table.metadata_table.timeline import (
    FOLDER,
    instant_path,
    instants_at,
    latest_time,
    metadata_timeline,
)
from tidemark.table.timeline.instant import Instant, State, new_instant_time

__all__ = ["FilesPartition", "roll_back", "write_deltacommit"]

log = structlog.get_logger(__name__)

WRITE_TOKEN = "0-0-0"
"""One log file per deltacommit, so a retry of the same instant rewrites the same file."""
OPERATION = "UPSERT_PREPPED"
"""The operation Hudi's metadata writer records on its deltacommits."""


@dataclass(frozen=True)
class FilesPartition:
    """What the ``files`` partition's newest HFile says about how to write another."""

    file_id: str
    schema: str
    options: WriteOptions

    @classmethod
    def read(cls, storage: Storage) -> FilesPartition:
        """From the folder: its one file group and its newest HFile (the newest log
        file's ``HFILE_DATA`` block, else the base file)."""
        names = [info.path[len(FOLDER) :] for info in storage.list_dir(FOLDER).files]
        bases = sorted((n for n in names if n.endswith(".hfile")), key=_instant_of_base)
        logs = sorted(
            (n for n in names if is_log_file_name(n)),
            key=lambda n: parse_log_file_name(n).instant,
        )
        ids = {n.split("_", 1)[0] for n in bases} | {parse_log_file_name(n).file_id for n in logs}
        if len(ids) != 1:
            raise FailedPreconditionError(
                f"the metadata table's files partition has {len(ids)} file groups "
                f"({', '.join(sorted(ids))}), Hudi writes one",
                field=FOLDER,
            )
        for hfile in _newest_hfiles(storage, bases, logs):
            reader = HFileReader(hfile)
            schema = reader.file_info.get(b"schema")
            if schema:
                return cls(ids.pop(), schema.decode(), reader.options)
        raise FailedPreconditionError(
            "the metadata table's files partition has no HFile to take its schema from",
            field=FOLDER,
        )


def _instant_of_base(name: str) -> str:
    return name.rsplit("_", 1)[-1].removesuffix(".hfile")


def _newest_hfiles(storage: Storage, bases: list[str], logs: list[str]) -> Iterator[bytes]:
    """The HFiles of the partition, newest first: log blocks (small, one per deltacommit),
    then base files (the whole partition, read only when no log block is left)."""
    for name in reversed(logs):
        for block in reversed(read_blocks(storage.read(f"{FOLDER}{name}"))):
            if block.block_type is BlockType.HFILE_DATA:
                yield block.content
    for name in reversed(bases):
        yield storage.read(f"{FOLDER}{name}")


def write_deltacommit(storage: Storage, instant: str, changes: FileChanges) -> None:
    """Record ``changes`` of data instant ``instant`` in the ``files`` partition, completed
    on the metadata timeline. Idempotent: a completed deltacommit at ``instant`` is left as
    it is; a pending one (an earlier attempt) is carried on, its log file rewritten."""
    if any(found.is_completed for found in instants_at(storage, instant)):
        return
    partition = FilesPartition.read(storage)
    hfile = write_hfile(
        encode_records(changes.records(), partition.schema),
        file_info={b"schema": partition.schema.encode()},
        options=partition.options,
    )
    header = {HeaderKey.SCHEMA: partition.schema, HeaderKey.INSTANT_TIME: instant}
    data = encode_block(LogBlock(BlockType.HFILE_DATA, header, hfile))
    name = log_file_name(partition.file_id, instant, 1, WRITE_TOKEN).name
    requested = Instant(instant, DELTA_COMMIT, State.REQUESTED, layout=2)
    storage.create_if_absent(instant_path(requested), b"")
    empty = CommitMetadata(partition_to_write_stats={}, operation_type=OPERATION)
    inflight = requested.with_state(State.INFLIGHT)
    storage.create_if_absent(instant_path(inflight), commit_metadata_to_avro(empty, DELTA_COMMIT))
    storage.write(f"{FOLDER}{name}", data)
    records = len(changes.records())
    stat = WriteStat(
        file_id=partition.file_id,
        path=f"{FILES}/{name}",
        prev_commit=instant,
        num_writes=records,
        num_deletes=0,
        num_update_writes=records,
        num_inserts=0,
        total_write_bytes=len(data),
        file_size_in_bytes=len(data),
        partition_path=FILES,
        log_version=1,
        log_offset=0,
        base_file="",
        log_files=(name,),
    )
    metadata = CommitMetadata(
        partition_to_write_stats={FILES: [stat]},
        operation_type=OPERATION,
        extra_metadata={"schema": partition.schema},
    )
    completion = new_instant_time(after=latest_time(metadata_timeline(storage)))
    done = Instant(instant, DELTA_COMMIT, State.COMPLETED, completion, layout=2)
    storage.create_if_absent(instant_path(done), commit_metadata_to_avro(metadata, DELTA_COMMIT))
    log.info("metadata_table.deltacommit", table=storage.uri, instant=instant, log_file=name)


def roll_back(storage: Storage, instant: str) -> bool:
    """Remove the metadata deltacommit of data instant ``instant`` (rolled back or never
    completed): the completed file first (readers stop reading it), then its log files,
    then its pending files. Whether there was one."""
    found = [i for i in instants_at(storage, instant) if i.action == DELTA_COMMIT]
    if not found:
        return False
    ordered = sorted(found, key=lambda i: i.state, reverse=True)
    completed = [instant_path(i) for i in ordered if i.is_completed]
    storage.delete_many(completed)
    logs = [
        info.path
        for info in storage.list_dir(FOLDER).files
        if is_log_file_name(name := info.path[len(FOLDER) :])
        and parse_log_file_name(name).instant == instant
    ]
    storage.delete_many(logs)
    storage.delete_many([instant_path(i) for i in ordered if not i.is_completed])
    log.info("metadata_table.deltacommit_rolled_back", table=storage.uri, instant=instant)
    return True
