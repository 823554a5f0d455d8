"""A table's files listed through its metadata table's ``files`` partition instead of
storage, as Hudi's readers do: a few reads of the partition's latest slice (its base HFile
and the logs since) instead of a LIST per partition folder (on S3, one request per 1,000
objects and per folder walked to find the partitions).

A log block counts once its data instant is completed on the data timeline (or is older
than it: archived, or the metadata table's own initialisation), as Hudi's reader rule.
A partition is listed from its record; the partitions record names them all; a file
needs a size above 0 to be live. Sizes are the recorded ones; modification times are
unknown (0): nothing that judges an object's age (orphan clean-up) lists through here."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import structlog

from tidemark.storage.base import FileInfo, Storage
from tidemark.table.metadata_table.files_records import ALL_PARTITIONS, NON_PARTITIONED
from tidemark.table.metadata_table.slices import FilesSlices, merged_records
from tidemark.table.metadata_table.timeline import metadata_timeline

__all__ = ["MetadataListing"]

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class MetadataListing:
    """Lists the files of ``storage``'s table through its ``files`` partition; a data
    instant's records count when ``visible`` says it completed."""

    storage: Storage
    visible: Callable[[str], bool]

    def partitions(self) -> list[str]:
        """Every partition the partitions record names."""
        return sorted(self._partition_files)

    def list_files(self, partitions: Iterable[str] | None) -> Iterator[FileInfo]:
        """The files of ``partitions`` (all when None), by partition then name."""
        by_partition = self._partition_files
        wanted = sorted(by_partition if partitions is None else set(partitions))
        for partition in wanted:
            for name, size in sorted(by_partition.get(partition, {}).items()):
                yield FileInfo(f"{partition}/{name}" if partition else name, size, 0.0)

    @functools.cached_property
    def _partition_files(self) -> dict[str, dict[str, int]]:
        """Read once: a listing is one snapshot, as the view it serves."""
        latest = FilesSlices.read(self.storage, metadata_timeline(self.storage)).latest
        records = {
            row: files for row, _, files in merged_records(self.storage, latest, self.visible)
        }
        named = records.get(ALL_PARTITIONS, {})
        listing = {
            _partition(row): {
                name: size for name, (size, _) in records.get(row, {}).items() if size > 0
            }
            for row in named
        }
        log.debug("metadata_table.listed", table=self.storage.uri, partitions=len(listing))
        return listing


def _partition(row: str) -> str:
    return "" if row == NON_PARTITIONED else row
