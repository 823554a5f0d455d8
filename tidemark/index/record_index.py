"""RecordIndex: one table's record index, a base file plus per-commit deltas per shard.

Visibility follows the table's timeline (``tidemark.table.timeline.layout1``): a delta counts once
its instant is a completed commit or replacecommit on the active timeline (of the
table's version), or is older than the whole active timeline and listed by Hudi's
archived timeline (version 8 and 9: the LSM history) as a completed write: the rule the
file-system view applies to base files, so a late delta of a rolled-back write never
counts, even once archiving passes it. A delta whose instant is at or before its shard's
base instant is already folded into the base. Among the rest, the newest instant wins and
a tombstone deletes. Compaction folds the visible deltas before the earliest pending
instant into new bases; ``discard`` deletes a never-completed instant's deltas.

Lookups sort the batch once, split it by shard and ask each shard's base, then one merged
view of its visible deltas (built in memory, cached under the list of deltas it merges),
for whole sorted runs of keys (``ShardReader.lookup``): two searches per shard, however
many deltas are outstanding.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidemark.checks import require_positive
from tidemark.errors import (
    DataLossError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
)
from tidemark.index import layout
from tidemark.index.block_cache import BlockCache
from tidemark.index.keys import encode_keys
from tidemark.index.shard_file import KIND_BASE, KIND_DELTA, ShardReader, write_shard
from tidemark.index.sharding import group_by_shard, shard_of
from tidemark.index.wire import CHANGE_COLUMNS, LOOKUP_COLUMNS
from tidemark.storage.base import Storage
from tidemark.storage.damaged import read_parsed
from tidemark.table.leases.storage_lease import STALE_TEMPORARY_S, StorageLease
from tidemark.table.metadata.actions import WRITE_ACTIONS
from tidemark.table.properties.config import read_properties
from tidemark.table.timeline.instant import new_instant_time, validate_instant_time
from tidemark.table.timeline.layout1 import Timeline
from tidemark.table.timeline.versions import Archive, open_archive, open_timeline

COMPACT_AFTER_DELTAS = 8
"""A shard is compacted once it has this many visible deltas."""
COMPACT_AT_DELTA_SHARE = 1.0
"""Or, for readers that search each delta in turn (``single_use``: a job's reads), once its
visible deltas hold this share of its base's entries, however few they are: a change of
most keys at once (a clustering of the whole table moves every key) leaves a base whose
entries are nearly all superseded, and every lookup searches the deltas too (100 keys of
``python -m benchmarks read``'s clustered copy, two deltas per shard as large as its base:
planned in 0.14 s before compaction, 0.02 s after). The index service merges a shard's
deltas once for all its lookups, so its background compaction goes by their count."""
COMPACTION_LEASE_S = 60.0
"""Lease of the compaction lock: a killed compactor blocks the next one at most this long."""
MAX_STALENESS_S = 1.0
"""A lookup without ``as_of`` re-reads the timeline when its view is older than this."""


@dataclass(frozen=True)
class IndexStats:
    entries: int
    shards: int
    bytes: int
    base_files: int
    delta_files: int
    max_shard_deltas: int
    cache_hits: int
    cache_misses: int
    cache_bytes: int


@dataclass(frozen=True)
class _View:
    """What the index knows: timeline, each shard's base instant and every stage manifest."""

    completed: frozenset[str]
    archived: frozenset[str]
    pending: tuple[str, ...]
    latest: str | None
    bases: tuple[str, ...]
    manifests: tuple[layout.StageManifest, ...]
    loaded_at: float = field(default_factory=time.monotonic)

    def visible(self, instant: str) -> bool:
        return instant in self.completed or instant in self.archived

    def delta_counts(self) -> list[int]:
        """Visible deltas past its base per shard, in one pass over the manifests."""
        counts = [0] * len(self.bases)
        for manifest in self.manifests:
            if self.visible(manifest.instant):
                for shard in manifest.shards:
                    counts[shard] += manifest.instant > self.bases[shard]
        return counts

    def deltas(self, shard: int, before: str | None = None) -> list[layout.StageManifest]:
        """Visible manifests touching ``shard`` past its base, oldest first."""
        return sorted(
            (
                manifest
                for manifest in self.manifests
                if shard in manifest.shards
                and manifest.instant > self.bases[shard]
                and self.visible(manifest.instant)
                and (before is None or manifest.instant < before)
            ),
            key=lambda manifest: manifest.name,
        )


def _table_timeline(storage: Storage) -> Timeline:
    """The timeline of the table's version; a folder without ``hoodie.properties`` is
    read as layout 1, as every timeline was before table versions 8 and 9."""
    try:
        props = read_properties(storage)
    except NotFoundError:
        return Timeline(storage)
    return open_timeline(storage, props)


class RecordIndex:
    """The record index of the table at ``storage``'s root. Thread-safe."""

    def __init__(
        self,
        storage: Storage,
        properties: layout.IndexProperties,
        cache: BlockCache,
        *,
        single_use: bool = False,
    ) -> None:
        self.storage = storage
        self.properties = properties
        self.cache = cache
        self.single_use = single_use
        self._lock = threading.Lock()
        self._compacting = threading.Lock()
        self._timeline = _table_timeline(storage)
        self._archive: Archive | None = None
        self._manifests: dict[str, layout.StageManifest] = {}
        self._view = self._load_view()

    @staticmethod
    def exists(storage: Storage) -> bool:
        return storage.exists(layout.PROPERTIES_PATH)

    @classmethod
    def open(
        cls, storage: Storage, cache: BlockCache | None = None, *, single_use: bool = False
    ) -> RecordIndex:
        """FailedPreconditionError(field="table") when the table has no record index,
        DataLossError when its ``index.properties`` is damaged. ``single_use``: opened for
        one lookup (a read's plan), which then decodes only the blocks it needs: deltas
        are searched in turn, not merged (``_lookup_readers``), and no shard file is made
        resident (``ShardReader.lookup``); both pay off over many lookups, never one."""
        try:
            properties = layout.IndexProperties.read(storage)
        except NotFoundError as missing:
            raise FailedPreconditionError(
                f"{storage.uri} has no record index (run `tidemark index build`)", field="table"
            ) from missing
        return cls(storage, properties, cache or BlockCache(), single_use=single_use)

    @property
    def num_shards(self) -> int:
        return self.properties.num_shards

    def _load_view(self) -> _View:
        """Re-read the timeline, the newest bases record and any new stage manifests."""
        self._timeline.reload()
        instants = self._timeline.instants()
        bases = self._read_bases()
        listed = {
            info.path.rsplit("/", 1)[-1].removesuffix(".json"): info.path
            for info in self.storage.list_dir(layout.STAGED_DIR).files
        }
        for name, path in listed.items():
            if name not in self._manifests:
                try:
                    self._manifests[name] = read_parsed(
                        self.storage, path, layout.StageManifest.from_bytes, layout.REBUILD
                    )
                except NotFoundError:
                    continue
        self._manifests = {name: m for name, m in self._manifests.items() if name in listed}
        earliest = instants[0].timestamp if instants else None
        return _View(
            completed=frozenset(i.timestamp for i in self._timeline.completed(WRITE_ACTIONS)),
            archived=self._archived_writes(earliest),
            pending=tuple(i.timestamp for i in self._timeline.pending()),
            latest=instants[-1].timestamp if instants else None,
            bases=bases,
            manifests=tuple(self._manifests.values()),
        )

    def _archived_writes(self, earliest: str | None) -> frozenset[str]:
        """Read only when a stage manifest is older than the active timeline."""
        if earliest is None or all(m.instant >= earliest for m in self._manifests.values()):
            return frozenset()
        if self._archive is None:
            self._archive = open_archive(self.storage, read_properties(self.storage))
        return self._archive.completed_writes()

    def _read_bases(self) -> tuple[str, ...]:
        records = self.storage.list_dir(layout.BASES_DIR).files
        if not records:
            return (self.properties.as_of,) * self.num_shards
        return self._read_bases_record(records[-1].path)

    def _read_bases_record(self, path: str) -> tuple[str, ...]:
        """A ``bases/`` record: one base instant per shard (DataLossError when damaged)."""

        def parse(data: bytes) -> tuple[str, ...]:
            bases = tuple(json.loads(data))
            if len(bases) != self.num_shards or not all(isinstance(b, str) for b in bases):
                raise ValueError(f"not {self.num_shards} base instants: {data[:100]!r}")
            return bases

        return read_parsed(self.storage, path, parse, layout.REBUILD)

    def refresh(self) -> None:
        with self._lock:
            self._view = self._load_view()

    def _current_view(self, as_of: str | None) -> _View:
        view = self._view
        stale = (
            view.latest is None or as_of > view.latest or as_of not in view.completed
            if as_of is not None
            else time.monotonic() - view.loaded_at > MAX_STALENESS_S
        )
        if stale:
            self.refresh()
        return self._view

    def _reader(self, path: str) -> ShardReader:
        key = ("reader", self.storage.uri, path)
        reader = self.cache.get(key)
        if reader is None:
            reader = ShardReader.open(self.storage, path, self.cache)
            self.cache.put(key, reader, reader.meta_bytes)
        assert isinstance(reader, ShardReader)
        return reader

    def _shard_files(self, view: _View, shard: int) -> list[str]:
        return [layout.base_path(shard, view.bases[shard])] + [
            layout.delta_path(shard, m.instant, m.stage_id) for m in view.deltas(shard)
        ]

    def lookup(self, keys: pa.Array, as_of: str | None = None) -> pa.Table:
        """Each key's location (columns key, partition, file_id, instant, the last three
        dictionary-encoded; nulls where the key is absent), in the order of ``keys``. A
        file deleted under us by a concurrent compaction makes one refresh and retry."""
        if as_of is not None:
            validate_instant_time(as_of, field="as_of")
        try:
            return self._lookup(keys, self._current_view(as_of))
        except NotFoundError:
            self.refresh()
            with _missing_is_damage():
                return self._lookup(keys, self._view)

    def _lookup(self, keys: pa.Array, view: _View) -> pa.Table:
        """Keys are ordered by shard, then by their 8-byte prefix (integer sorts only), and
        copied once; each shard's files then search their slice of the batch in nearly
        sorted order, which keeps the binary searches in cache. Repeated keys are simply
        searched again: de-duplicating strings would cost more than it saves."""
        encoded = encode_keys(keys)
        shards = shard_of(keys, self.num_shards)
        by_prefix = np.argsort(encoded.prefixes())
        by_shard, bounds = group_by_shard(shards[by_prefix], self.num_shards)
        order = by_prefix[by_shard]
        grouped = encoded.take(order)
        winner = np.full(len(keys), -1, np.int64)
        dictionaries: list[pa.Table] = []
        dictionary_start = 0
        for shard in np.flatnonzero(np.diff(bounds)).tolist():
            part = slice(int(bounds[shard]), int(bounds[shard + 1]))
            batch, positions = grouped.take(part), order[part]
            for reader in self._lookup_readers(view, shard):
                found, codes = reader.lookup(batch, make_resident=not self.single_use)
                winner[positions[found]] = dictionary_start + codes[found].astype(np.int64)
                dictionaries.append(reader.dictionary)
                dictionary_start += len(reader.dictionary)
        return _locations(keys, winner, dictionaries)

    def _lookup_readers(self, view: _View, shard: int) -> list[ShardReader]:
        """What a lookup searches in one shard, oldest first (a later file's entry wins):
        its base, then its visible deltas merged into one file held in memory (newest
        entry per key, tombstones kept: they delete base entries), so a lookup does two
        searches per shard however many deltas are outstanding. The merged file is cached
        under the exact list of delta files it merges: a delta added or folded changes the
        list, so a lookup never sees a stale merge. A ``single_use`` index searches each
        delta in turn, with the same answers: merging rewrites every entry of the deltas
        (5 s for two deltas of 200,000 keys), which pays off over many lookups only."""
        base = self._reader(layout.base_path(shard, view.bases[shard]))
        deltas = view.deltas(shard)
        paths = [layout.delta_path(shard, m.instant, m.stage_id) for m in deltas]
        if len(paths) <= 1 or self.single_use:
            return [base, *map(self._reader, paths)]
        key = ("merged deltas", self.storage.uri, *paths)
        merged = self.cache.get(key)
        if merged is None:
            newest = self._newest(paths, keep_tombstones=True)
            data = _shard_bytes(newest, KIND_DELTA, deltas[-1].instant)
            digest = hashlib.sha256("\n".join(paths).encode()).hexdigest()[:16]
            name = f"{self.storage.uri}/{layout.shard_dir(shard)}/merged-deltas-{digest}"
            merged = ShardReader.from_bytes(data, self.cache, name)
            self.cache.put(key, merged, len(data) + merged.meta_bytes)
        assert isinstance(merged, ShardReader)
        return [base, merged]

    def stage(self, instant: str, changes: pa.Table) -> None:
        """Write ``changes`` (key, partition, file_id; null partition and file_id delete
        the key) as deltas tagged with ``instant``, invisible until it completes. Several
        calls per instant add up; a retried call writes the same files again."""
        staged = delta_files(instant, changes, self.num_shards)
        if staged is None:
            return
        manifest, files = staged
        with self._lock:
            self._timeline.reload()
            if self._timeline.is_completed(instant) and manifest.name not in self._manifests:
                raise FailedPreconditionError(
                    f"instant {instant} is already completed; its changes are final",
                    field="instant",
                )
            write_stage(self.storage, manifest, files)
            self._manifests[manifest.name] = manifest
            self._view = self._load_view()

    def discard(self, instant: str) -> int:
        """Delete the deltas of a never-completed ``instant`` (rollback); returns how many
        stage calls were discarded. FailedPreconditionError for a completed instant."""
        validate_instant_time(instant)
        with self._lock:
            self._view = self._load_view()
            if instant in self._view.completed:
                raise FailedPreconditionError(
                    f"instant {instant} is completed; its index changes cannot be discarded",
                    field="instant",
                )
            doomed = [m for m in self._view.manifests if m.instant == instant]
            self._delete_manifests(doomed)
            return len(doomed)

    def discard_rolled_back(self) -> int:
        """Discard the deltas of instants gone from the timeline (rolled back) that are
        older than its newest instant; pending instants keep theirs."""
        with self._lock:
            self._view = self._load_view()
            doomed = _rolled_back(self._view)
            self._delete_manifests(doomed)
            return len({m.instant for m in doomed})

    def _delete_manifests(self, manifests: list[layout.StageManifest]) -> None:
        """Delta files first, then the manifests that named them (hold ``_lock``)."""
        self.storage.delete_many(path for m in manifests for path in m.delta_paths())
        self.storage.delete_many(m.path for m in manifests)
        for manifest in manifests:
            self._manifests.pop(manifest.name, None)
        self._view = self._load_view()

    def compact(
        self,
        min_deltas: int = COMPACT_AFTER_DELTAS,
        *,
        delta_share: float | None = COMPACT_AT_DELTA_SHARE,
        owner: str = "record-index compaction",
        lease_s: float = COMPACTION_LEASE_S,
    ) -> Compaction:
        """Fold visible deltas into new bases for shards with at least ``min_deltas`` of
        them, or with deltas holding ``delta_share`` of their base's entries (None: by
        count alone); only deltas before the earliest pending instant are folded. Then
        delete what the new bases made useless: folded deltas, fully folded and
        rolled-back manifests, old and orphaned bases, killed writers' temporaries. One
        compaction per table at a time, across processes (a lease lock in
        ``compaction-lock/``): ConflictError(field="table") while another one runs.

        Crash safety comes from the order: new base files (each written atomically, named
        by the newest folded instant; unreferenced until published), then the ``bases/``
        record that publishes them, then the deletions, the older records last. A kill
        before the record leaves the old view whole plus orphans the next compaction of
        those shards deletes; a kill after it leaves files the new view no longer reads and
        the older records that name them for the next compaction to delete. Staging and
        discarding go on meanwhile: they only touch pending instants, which compaction
        never folds."""
        require_positive("min_deltas", min_deltas)
        with (
            self._compacting,
            StorageLease(self.storage, owner, lease_s, lock_dir=layout.COMPACTION_LOCK_DIR) as lock,
        ):
            with self._lock:
                self._view = self._load_view()
                view = self._view
            records = [info.path for info in self.storage.list_dir(layout.BASES_DIR).files]
            before = min(view.pending) if view.pending else None
            plan = {
                shard: deltas
                for shard, count in enumerate(view.delta_counts())
                if count
                and (deltas := view.deltas(shard, before))
                and self._due(view, shard, deltas, min_deltas, delta_share)
            }
            bases = list(view.bases)
            for shard, deltas in plan.items():
                bases[shard] = deltas[-1].instant
                self.storage.write(
                    layout.base_path(shard, bases[shard]), self._merged(view, shard, deltas)
                )
            lock.check()
            if plan:
                records = self._publish(view, bases, records)
            self._delete_replaced(bases, records[:-1], list(plan))
            folded = [
                m
                for m in view.manifests
                if view.visible(m.instant) and all(m.instant <= bases[s] for s in m.shards)
            ]
            retired = folded + _rolled_back(view)
            with self._lock:
                self._delete_manifests(retired)
            self.storage.delete_many(records[:-1])
            return Compaction(
                tuple(sorted(plan)),
                sum(len(deltas) for deltas in plan.values()),
                len(retired),
            )

    def _publish(self, view: _View, bases: list[str], records: list[str]) -> list[str]:
        """Write the ``bases/`` record making ``bases`` current (named by a fresh instant,
        so it sorts last); returns every record, oldest first. Before the first one the
        build's bases get a record too: until the older records are deleted they tell a
        compaction that follows a crash which base files were replaced."""
        if not records:
            records = [layout.bases_path(self.properties.as_of)]
            self.storage.write(records[0], json.dumps(view.bases).encode())
        newest = records[-1].rsplit("/", 1)[-1].removesuffix(".json")
        record = layout.bases_path(new_instant_time(max([*bases, newest])))
        with self._lock:  # published: lookups from now on read the new bases
            self.storage.write(record, json.dumps(bases).encode())
            self._view = self._load_view()
        return [*records, record]

    def _delete_replaced(self, bases: list[str], older: list[str], rewritten: list[int]) -> None:
        """Delete the base files ``bases`` replaced: those the ``older`` records name (left
        by this compaction, or by one killed after publishing), orphans of a compaction
        killed before publishing in the ``rewritten`` shards, and killed writers'
        temporaries there that are too old to be a stage call's in progress."""
        replaced = set()
        for path in older:
            try:
                named = self._read_bases_record(path)
            except NotFoundError:
                continue
            replaced |= {
                layout.base_path(shard, old)
                for shard, old in enumerate(named)
                if old != bases[shard]
            }
        stale_before = time.time() - STALE_TEMPORARY_S
        for shard in rewritten:
            current = layout.base_path(shard, bases[shard])
            folder = layout.shard_dir(shard)
            replaced |= {
                info.path
                for info in self.storage.list_dir(folder).files
                if _is_base(info.path) and info.path != current
            }
            replaced |= {
                partial.path
                for partial in self.storage.partial_files(folder)
                if partial.modified_at < stale_before
            }
        self.storage.delete_many(sorted(replaced))

    def _merge(self, view: _View, shard: int, deltas: list[layout.StageManifest]) -> pa.Table:
        """What a lookup sees in one shard: base + ``deltas`` with the newest entry of each
        key kept and tombstones dropped, in key order (columns key, partition, file_id,
        instant)."""
        paths = [layout.base_path(shard, view.bases[shard])] + [
            layout.delta_path(shard, m.instant, m.stage_id) for m in deltas
        ]
        return self._newest(paths, keep_tombstones=False)

    def _newest(self, paths: list[str], *, keep_tombstones: bool) -> pa.Table:
        """The entries of the shard files at ``paths`` (oldest first), the newest of each
        key kept, in key order (columns partition, file_id, instant, key, rank)."""
        tables = []
        for rank, path in enumerate(paths):
            reader = self._reader(path)
            keys, codes = reader.scan()
            located = reader.dictionary.take(pa.array(codes))
            tables.append(
                located.append_column("key", keys.to_arrow()).append_column(
                    "rank", pa.array(np.full(len(keys), -rank, np.int64))
                )
            )
        merged = pa.concat_tables(tables).sort_by([("key", "ascending"), ("rank", "ascending")])
        keys = merged["key"].combine_chunks()
        newest = np.ones(len(keys), bool)
        if len(keys) > 1:
            newest[1:] = pc.not_equal(keys[1:], keys[:-1]).to_numpy(False)
        if not keep_tombstones:
            newest &= pc.is_valid(merged["partition"]).to_numpy(False)
        return merged.filter(pa.array(newest))

    def _merged(self, view: _View, shard: int, deltas: list[layout.StageManifest]) -> bytes:
        """Base + deltas of one shard as one base file, as of the newest delta."""
        return _shard_bytes(self._merge(view, shard, deltas), KIND_BASE, deltas[-1].instant)

    def oldest_unfolded(self) -> str | None:
        """The oldest instant with a delta past its shard's base (not folded yet)."""
        view = self._current_view(None)
        unfolded = [
            manifest.instant
            for manifest in view.manifests
            if any(manifest.instant > view.bases[shard] for shard in manifest.shards)
        ]
        return min(unfolded, default=None)

    def max_deltas(self) -> int:
        """The most visible deltas any shard has now (what a lookup reads past its base)."""
        return max(self._current_view(None).delta_counts(), default=0)

    def needs_compaction(
        self,
        min_deltas: int = COMPACT_AFTER_DELTAS,
        *,
        delta_share: float | None = COMPACT_AT_DELTA_SHARE,
    ) -> bool:
        """Whether ``compact(min_deltas, delta_share=delta_share)`` would fold a shard now
        (pending instants aside)."""
        view = self._current_view(None)
        return any(
            count and self._due(view, shard, view.deltas(shard), min_deltas, delta_share)
            for shard, count in enumerate(view.delta_counts())
        )

    def _due(
        self,
        view: _View,
        shard: int,
        deltas: list[layout.StageManifest],
        min_deltas: int,
        delta_share: float | None,
    ) -> bool:
        """Whether ``shard`` is compacted with ``deltas`` (visible, past its base): enough
        of them, or enough entries in them (each file's count is in its footer)."""
        if len(deltas) >= min_deltas:
            return True
        if delta_share is None:
            return False
        held = sum(
            self._reader(layout.delta_path(shard, m.instant, m.stage_id)).entries for m in deltas
        )
        base = self._reader(layout.base_path(shard, view.bases[shard])).entries
        return held >= delta_share * base

    def stats(self) -> IndexStats:
        """Entries count what a lookup sees: a shard with deltas is merged (newest entry
        per key, tombstones dropped), one without is its base's entry count. A file
        deleted under us by a concurrent compaction makes one refresh and retry."""
        try:
            return self._stats(self._current_view(None))
        except NotFoundError:
            self.refresh()
            with _missing_is_damage():
                return self._stats(self._view)

    def _stats(self, view: _View) -> IndexStats:
        entries = total_bytes = deltas = most = 0
        for shard in range(self.num_shards):
            files = self._shard_files(view, shard)
            total_bytes += sum(self._reader(path).size for path in files)
            deltas += len(files) - 1
            most = max(most, len(files) - 1)
            if len(files) == 1:
                entries += self._reader(files[0]).entries
            else:
                entries += len(self._merge(view, shard, view.deltas(shard)))
        cache = self.cache.stats()
        return IndexStats(
            entries,
            self.num_shards,
            total_bytes,
            self.num_shards,
            deltas,
            most,
            cache.hits,
            cache.misses,
            cache.bytes,
        )


@contextmanager
def _missing_is_damage() -> Iterator[None]:
    """A file the current view names that is missing after a refresh was not deleted by a
    concurrent compaction: it was lost, and a lookup must not answer without it."""
    try:
        yield
    except NotFoundError as missing:
        raise DataLossError(
            f"the record index names a file that is missing: {missing.message} ({layout.REBUILD})"
        ) from missing


@dataclass(frozen=True)
class Compaction:
    """What one compaction did: the shards it rewrote, the deltas it folded into them and
    the stage manifests it retired (every shard of theirs folded, or their instant rolled
    back)."""

    shards: tuple[int, ...]
    deltas_folded: int
    manifests_deleted: int


def _shard_bytes(entries: pa.Table, kind: str, as_of: str) -> bytes:
    """A shard file of ``entries`` (columns key, partition, file_id, instant)."""
    return write_shard(
        entries["key"],
        entries["partition"],
        entries["file_id"],
        entries["instant"],
        kind=kind,
        as_of=as_of,
    )


def _is_base(path: str) -> bool:
    return path.rsplit("/", 1)[-1].startswith("base_")


def _rolled_back(view: _View) -> list[layout.StageManifest]:
    """Manifests of instants gone from the timeline and older than its newest instant."""
    return [
        m
        for m in view.manifests
        if m.instant not in view.completed
        and m.instant not in view.pending
        and view.latest is not None
        and m.instant < view.latest
        and not view.visible(m.instant)
    ]


def delta_files(
    instant: str, changes: pa.Table, num_shards: int
) -> tuple[layout.StageManifest, dict[int, bytes]] | None:
    """The delta file of each shard ``changes`` touch, all tagged ``instant``, and their
    manifest (None: no change)."""
    validate_instant_time(instant)
    missing = [name for name in CHANGE_COLUMNS if name not in changes.column_names]
    if missing:
        raise InvalidArgumentError(f"missing column {missing[0]!r}", field="changes")
    keys = changes["key"].combine_chunks()
    instants = pa.array(np.full(len(keys), instant, object), pa.string())
    order, bounds = group_by_shard(shard_of(keys, num_shards), num_shards)
    files: dict[int, bytes] = {}
    for shard in np.flatnonzero(np.diff(bounds)).tolist():
        rows = pa.array(order[bounds[shard] : bounds[shard + 1]])
        files[shard] = write_shard(
            keys.take(rows),
            changes["partition"].take(rows),
            changes["file_id"].take(rows),
            instants.take(rows),
            kind=KIND_DELTA,
            as_of=instant,
        )
    if not files:
        return None
    digest = hashlib.sha256()
    for shard, data in sorted(files.items()):
        digest.update(shard.to_bytes(4, "little") + data)
    return layout.StageManifest(instant, digest.hexdigest()[:16], tuple(sorted(files))), files


def write_stage(storage: Storage, manifest: layout.StageManifest, files: dict[int, bytes]) -> None:
    """The manifest first, then its delta files (a lookup reads the deltas it lists)."""
    storage.write(manifest.path, manifest.to_bytes())
    for shard, path in zip(manifest.shards, manifest.delta_paths(), strict=True):
        storage.write(path, files[shard])


def _locations(keys: pa.Array, winner: np.ndarray, dictionaries: list[pa.Table]) -> pa.Table:
    """The output table: each key's winning dictionary row, null for absent or deleted.
    Location columns are dictionary-encoded over the rows some key won, so the service
    sends them as they are."""
    schema = pa.schema([(name, pa.string()) for name in LOOKUP_COLUMNS[1:]])
    combined = (
        pa.concat_tables([d if d.schema == schema else d.cast(schema) for d in dictionaries])
        if dictionaries
        else schema.empty_table()
    )
    tombstone = np.append(pc.is_null(combined["partition"]).to_numpy(False), True)
    winner = np.where(winner < 0, len(combined), winner)
    absent = tombstone[winner]
    used = np.zeros(len(combined) + 1, bool)
    used[winner[~absent]] = True
    renumbered = np.cumsum(used, dtype=np.int64) - 1
    indices = pa.array(np.where(absent, 0, renumbered[winner]).astype(np.int32), mask=absent)
    rows = combined.take(pa.array(np.flatnonzero(used[:-1]))).combine_chunks()
    return pa.table(
        {
            "key": pa.array(keys, pa.string()),
            **{
                name: pa.DictionaryArray.from_arrays(indices, rows[name].chunk(0))
                for name in LOOKUP_COLUMNS[1:]
            },
        }
    )


def discard_staged(storage: Storage, instant: str) -> None:
    """Delete what a rolled-back ``instant`` staged in the table's record index, if any
    (never visible: the instant never completed)."""
    if RecordIndex.exists(storage):
        RecordIndex.open(storage).discard(instant)


def oldest_unfolded_delta(storage: Storage) -> str | None:
    """The oldest instant a stage manifest names whose delta some shard has not folded
    into its base yet (None without a record index or such a delta): archival keeps it
    and every later instant on the active timeline."""
    if not RecordIndex.exists(storage):
        return None
    return RecordIndex.open(storage).oldest_unfolded()
