"""File sizing: which file group each incoming record goes to (Hudi's UpsertPartitioner).

Updates and deletes go to the file group holding the key. Inserts of a partition first top
up its small file groups (latest base file below the small-file limit) up to the target
size, then fill new file groups of about the target size. Sizes in records come from the
average record size of recent commits, as Hudi estimates them.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from tidemark.config import MIB
from tidemark.table.files.file_names import new_file_id
from tidemark.table.files.view import BaseFile
from tidemark.table.metadata.commit import NULL_COMMIT, CommitMetadata

DEFAULT_RECORD_SIZE = 1024
"""Hudi's ``hoodie.copyonwrite.record.size.estimate`` when there is no history."""
DEFAULT_TARGET_FILE_BYTES = 120 * MIB
DEFAULT_SMALL_FILE_LIMIT_BYTES = 100 * MIB


@dataclass(frozen=True)
class Bucket:
    """One output file: a new file group, or a new version of ``base`` (same file id)."""

    partition_path: str
    file_id: str
    base: BaseFile | None = None

    @property
    def prev_commit(self) -> str:
        return self.base.instant if self.base else NULL_COMMIT


@dataclass(frozen=True)
class InsertShares:
    """How a partition's inserts spread over buckets: bucket ids and cumulative fractions."""

    bucket_ids: tuple[int, ...]
    cumulative: tuple[float, ...]

    def bucket_for(self, fraction: float) -> int:
        """The bucket for a record whose key hashes to ``fraction`` in [0, 1)."""
        index = bisect.bisect_right(self.cumulative, fraction)
        return self.bucket_ids[min(index, len(self.bucket_ids) - 1)]


@dataclass
class WritePlan:
    buckets: list[Bucket] = field(default_factory=list)
    bucket_of_file: dict[str, int] = field(default_factory=dict)
    inserts: dict[str, InsertShares] = field(default_factory=dict)

    def bucket_for_file(self, base: BaseFile) -> int:
        """The bucket rewriting ``base``'s file group, created on first use."""
        if base.file_id not in self.bucket_of_file:
            self.bucket_of_file[base.file_id] = len(self.buckets)
            self.buckets.append(Bucket(base.partition_path, base.file_id, base))
        return self.bucket_of_file[base.file_id]

    def new_bucket(self, partition_path: str) -> int:
        self.buckets.append(Bucket(partition_path, new_file_id()))
        return len(self.buckets) - 1


def average_record_size(commits: Iterable[CommitMetadata]) -> int:
    """Bytes per record of the base files of the most recent commit that wrote some
    (newest first); log files hold Avro, another size."""
    for metadata in commits:
        stats = [stat for stat in metadata.write_stats if not stat.is_delta]
        records = sum(stat.num_writes for stat in stats)
        written = sum(stat.total_write_bytes for stat in stats)
        if records > 0 and written > 0:
            return max(1, written // records)
    return DEFAULT_RECORD_SIZE


def plan_writes(
    *,
    touched_files: Iterable[BaseFile],
    inserts_per_partition: Mapping[str, int],
    small_files: Iterable[BaseFile],
    record_size: int,
    target_file_bytes: int,
) -> WritePlan:
    """Buckets for the touched file groups, then insert shares per partition."""
    plan = WritePlan()
    for base in sorted(touched_files, key=lambda base: (base.partition_path, base.file_id)):
        plan.bucket_for_file(base)
    small_by_partition: dict[str, list[BaseFile]] = {}
    for base in small_files:
        small_by_partition.setdefault(base.partition_path, []).append(base)
    records_per_file = max(1, target_file_bytes // record_size)
    for partition_path in sorted(inserts_per_partition):
        remaining = inserts_per_partition[partition_path]
        weights: list[tuple[int, int]] = []
        for base in sorted(small_by_partition.get(partition_path, []), key=lambda b: b.size):
            room = max(0, (target_file_bytes - base.size) // record_size)
            take = min(room, remaining)
            if take > 0:
                weights.append((plan.bucket_for_file(base), take))
                remaining -= take
        new_files = math.ceil(remaining / records_per_file)
        for index in range(new_files):
            share = remaining // new_files + (1 if index < remaining % new_files else 0)
            weights.append((plan.new_bucket(partition_path), share))
        plan.inserts[partition_path] = _shares(weights)
    return plan


def _shares(weights: list[tuple[int, int]]) -> InsertShares:
    total = sum(weight for _, weight in weights)
    cumulative: list[float] = []
    running = 0
    for _, weight in weights:
        running += weight
        cumulative.append(running / total)
    return InsertShares(tuple(bucket for bucket, _ in weights), tuple(cumulative))
