"""The ``files`` partition's records (``HoodieMetadataRecord`` with ``filesystemMetadata``),
as Hudi 1.x writes them for one data instant: the partitions record (type 1, row
``__all_partitions__``: each touched partition -> size 0) and one record per touched
partition (type 2, row = the partition path, ``.`` when unpartitioned: file name ->
size, or ``isDeleted`` for a tombstone). The Avro ``key`` is empty: the HFile row holds
it. Readers merge a file's records across instants (a tombstone cancels, else the larger
size wins), so a record lists only what changed."""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import fastavro

from tidemark.table.metadata.commit import CommitMetadata

__all__ = ["ALL_PARTITIONS", "FileChanges", "FileList", "encode_records"]

ALL_PARTITIONS = "__all_partitions__"
NON_PARTITIONED = "."
PARTITION_LIST = 1
FILE_LIST = 2
FILE_NAME_FIELD = "_hoodie_file_name"
"""Set in a base file's records to the base file's name, as Hudi's compaction does."""

FileList = tuple[str, int, dict[str, tuple[int, bool]]]
"""One record: (row, type, file name -> (size, deleted))."""


@dataclass(frozen=True)
class FileChanges:
    """What one data instant changed, per partition: files added (name -> size in bytes;
    a log file with the size it has now) and files deleted (names: a clean's)."""

    added: Mapping[str, Mapping[str, int]]
    deleted: Mapping[str, Sequence[str]] = field(default_factory=dict)

    @classmethod
    def of_commit(cls, metadata: CommitMetadata) -> FileChanges:
        """A commit's, deltacommit's or replacecommit's new files (a replacecommit's
        replaced file groups stay listed: readers drop them by the replacecommit)."""
        added: dict[str, dict[str, int]] = {}
        for stat in metadata.write_stats:
            name = stat.path.rsplit("/", 1)[-1]
            added.setdefault(stat.partition_path, {})[name] = stat.file_size_in_bytes
        return cls(added)

    @classmethod
    def of_clean(cls, deleted: Mapping[str, Sequence[str]]) -> FileChanges:
        """A clean's deleted files (table-relative paths by partition) as tombstones."""
        names = {p: [path.rsplit("/", 1)[-1] for path in paths] for p, paths in deleted.items()}
        return cls({}, {partition: files for partition, files in names.items() if files})

    def records(self) -> list[FileList]:
        """The records, sorted by row as an HFile wants. The
        partitions record names the partitions with new files (a clean's tombstones name
        none, as Hudi's)."""
        by_partition: list[FileList] = []
        if self.added:
            listed = {_row(partition): (0, False) for partition in sorted(self.added)}
            by_partition.append((ALL_PARTITIONS, PARTITION_LIST, listed))
        for partition in sorted({*self.added, *self.deleted}):
            files = {name: (size, False) for name, size in self.added.get(partition, {}).items()}
            files |= dict.fromkeys(self.deleted.get(partition, ()), (0, True))
            by_partition.append((_row(partition), FILE_LIST, files))
        return sorted(by_partition, key=lambda record: record[0].encode())


def _row(partition: str) -> str:
    return partition or NON_PARTITIONED


def encode_records(
    records: Iterable[FileList], schema: str, *, file_name: str | None = None
) -> list[tuple[bytes, bytes]]:
    """The HFile cells (row, Avro value) of ``records`` in ``schema``, the table's own
    ``HoodieMetadataRecord`` schema (every other field null; ``_hoodie_file_name`` is
    ``file_name``, the base file's, where the schema has it)."""
    parsed = json.loads(schema)
    writer_schema = fastavro.parse_schema(parsed)
    empty: dict[str, Any] = {field["name"]: None for field in parsed["fields"]}
    if file_name is not None and FILE_NAME_FIELD in empty:
        empty[FILE_NAME_FIELD] = file_name
    cells = []
    for row, kind, files in records:
        record = empty | {
            "key": "",
            "type": kind,
            "filesystemMetadata": {
                name: {"size": size, "isDeleted": gone} for name, (size, gone) in files.items()
            },
        }
        value = io.BytesIO()
        fastavro.schemaless_writer(value, writer_schema, record)
        cells.append((row.encode(), value.getvalue()))
    return cells
