"""Client side of the index service: ``IndexClient`` for a writer's executors (tagging
keys, staging a commit's changes by shard), its driver (status, discarding a
rolled-back instant) and operators (stats, compaction).

Picklable: only the address and the table travel, the channel opens lazily in the
process that uses it. Keys go out and locations come back as Arrow IPC (see
``tidemark.rpc.arrow_ipc``) in batches of at most ``batch_keys`` that also fit half the
channel's message limit (long keys make smaller batches); one batch is a unary call,
more are one StreamLookup call that, when the service becomes unreachable mid-stream,
is retried from the first unanswered batch. Every call is idempotent (a stage call
writes the same delta files again), so retries are always safe.

An address listing several replicas (``host0:port,host1:port``) routes by shard
(``index_replicas``): a lookup is split by the replica owning each key's shard, asked
of them at once and merged back in the order of the keys; a stage call goes whole to
the owner of its first key's shard (a Spark task stages rows sorted by shard), so the
delta files it writes are the same whichever replica writes them; the other calls go
to the owner of shard 0. Each fails over to the next replica when one is down.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidemark.clients.index_replicas import Replicas, replica_addresses
from tidemark.config import ClientConfig
from tidemark.index.build import BuildStatus
from tidemark.index.sharding import shard_of
from tidemark.index.wire import LOCATION_COLUMNS
from tidemark.proto.common.v1.common_pb2 import TableRef
from tidemark.proto.index.v1 import index_service_pb2 as pb
from tidemark.proto.index.v1.index_service_pb2_grpc import IndexServiceStub
from tidemark.rpc import arrow_ipc
from tidemark.rpc.client import ServiceClient, ServiceName
from tidemark.storage.uri import canonical_uri

INDEX_SERVICE = ServiceName(
    full_name=pb.DESCRIPTOR.services_by_name["IndexService"].full_name,
    label="index service",
    address_field="index_service_address",
)
BATCH_KEYS = 100_000
"""Keys per request: large enough that the per-call cost vanishes, 4 MB of UUID keys."""
LOCATIONS_FIELD = "locations"
ROW_OVERHEAD_BYTES = 256
"""What a key's row adds beyond its own bytes, in a request or its answer (the answer's
partition, file id and instant, Arrow offsets), when sizing batches."""
TABLE_SHARD = 0
"""The shard whose owner answers the calls about the whole table (status, stats...)."""

R = TypeVar("R")
Client = ServiceClient[IndexServiceStub]


@dataclasses.dataclass(frozen=True)
class IndexStats:
    entries: int
    shards: int
    bytes: int
    cache_hits: int
    cache_misses: int
    cache_hit_rate: float
    cache_bytes: int
    cache_capacity_bytes: int
    delta_files: int
    max_shard_deltas: int


@dataclasses.dataclass(frozen=True)
class Compaction:
    """What a Compact call did (the engine's ``Compaction``, counted)."""

    shards_compacted: int
    deltas_folded: int
    manifests_deleted: int


class IndexClient:
    """The record index of one table through the service at ``address``: one address,
    or a comma-separated list of replicas routed by shard."""

    def __init__(
        self,
        address: str,
        table_uri: str,
        config: ClientConfig | None = None,
        *,
        batch_keys: int = BATCH_KEYS,
    ) -> None:
        addresses = replica_addresses(address, field=INDEX_SERVICE.address_field)
        self.address = ",".join(addresses)
        self._table = TableRef(base_path=canonical_uri(table_uri))
        self._client = ServiceClient(INDEX_SERVICE, addresses[0], IndexServiceStub, config)
        self._replicas = (
            Replicas(INDEX_SERVICE, addresses, self._table.base_path, IndexServiceStub, config)
            if len(addresses) > 1
            else None
        )
        self._shards: int | None = None
        """The table's shard count routing goes by (asked once; travels with a pickle)."""
        self.batch_keys = batch_keys

    def check_reachable(self) -> None:
        """The service (with replicas: any one of them) serves."""
        self._on_table(lambda client: client.check_reachable())

    def lookup(
        self, keys: Sequence[str] | pa.Array | pa.ChunkedArray, as_of: str | None = None
    ) -> pa.Table:
        """Each key's location: columns key, partition, file_id, instant (null when the key
        is absent), in the order of ``keys``. ``as_of``: the newest completed instant the
        caller has seen, so the service answers at least as of it."""
        if isinstance(keys, pa.ChunkedArray):
            keys = keys.combine_chunks()
        array = keys if isinstance(keys, pa.Array) else pa.array(keys, pa.string())
        if len(array) == 0:
            located = pa.table({name: pa.array([], pa.string()) for name in LOCATION_COLUMNS})
        elif self._replicas is None:
            located = self._lookup_at(self._client, array, as_of or "")
        else:
            answers = self._replicas.spread(
                shard_of(array, self._routing_shards()),
                lambda client, rows: self._lookup_at(client, array.take(rows), as_of or ""),
            )
            rows = np.concatenate([rows for rows, _ in answers])
            located = pa.concat_tables([answer for _, answer in answers])
            located = located.take(pa.array(np.argsort(rows, kind="stable")))
        return pa.table({"key": array, **{name: located[name] for name in LOCATION_COLUMNS}})

    def stage(self, instant: str, changes: pa.Table) -> int:
        """Stage ``changes`` (key, partition, file_id; both null = delete) for ``instant``,
        visible once it completes; returns how many were staged."""
        staged = 0
        row_bytes = np.sum([_value_bytes(changes[name]) for name in changes.column_names], axis=0)
        for start, length in self._batches(row_bytes):
            request = pb.StageChangesRequest(
                table=self._table,
                instant_time=instant,
                changes=arrow_ipc.encode(changes.slice(start, length)),
            )

            def send(client: Client, request: pb.StageChangesRequest = request) -> int:
                return client.call(client.stub.StageChanges, request).staged

            if self._replicas is None:
                staged += send(self._client)
            else:
                first = changes["key"].slice(start, 1).combine_chunks()
                shard = int(shard_of(first, self._routing_shards())[0])
                staged += self._replicas.first(shard, send)
        return staged

    def discard(self, instant: str) -> bool:
        """Delete what was staged for a never-completed ``instant``; whether there was any."""
        request = pb.DiscardInstantRequest(table=self._table, instant_time=instant)
        return bool(self._on_table(lambda c: c.call(c.stub.DiscardInstant, request).discarded))

    def status(self) -> BuildStatus:
        """The index's build status; its shard count is what routing goes by from now on
        (a driver asking before its client is pickled saves each executor the call)."""
        request = pb.BuildStatusRequest(table=self._table)
        response = self._on_table(lambda c: c.call(c.stub.BuildStatus, request))
        self._shards = max(response.shards, 1)
        return BuildStatus(
            response.exists,
            response.shards,
            response.as_of_instant,
            response.build_in_progress,
            response.format_version,
        )

    def stats(self) -> IndexStats:
        """The index's figures; the block cache's are those of the replica that answered
        (the owner of shard 0 when it is up)."""
        request = pb.StatsRequest(table=self._table)
        response = self._on_table(lambda c: c.call(c.stub.Stats, request))
        cache = response.block_cache
        return IndexStats(
            response.entries,
            response.shards,
            response.bytes,
            cache.hits,
            cache.misses,
            cache.hit_rate,
            cache.bytes,
            cache.capacity_bytes,
            response.delta_files,
            response.max_shard_deltas,
        )

    def compact(self, min_deltas: int = 1) -> Compaction:
        """Fold the visible deltas of shards with at least ``min_deltas`` of them now, or
        with deltas as large as their base (``RecordIndex.compact``)."""
        request = pb.CompactRequest(table=self._table, min_deltas=min_deltas)
        response = self._on_table(lambda c: c.call(c.stub.Compact, request))
        return Compaction(
            response.shards_compacted, response.deltas_folded, response.manifests_deleted
        )

    def _on_table(self, work: Callable[[Client], R]) -> R:
        """A call about the whole table: to the service, or to the replicas failing over."""
        if self._replicas is None:
            return work(self._client)
        return self._replicas.first(TABLE_SHARD, work)

    def _routing_shards(self) -> int:
        """The table's shard count, asked once unless ``status`` told it (1 for a table
        without an index yet: its calls fail the same on every replica)."""
        if self._shards is None:
            self._shards = max(self.status().shards, 1)
        return self._shards

    def _lookup_at(self, client: Client, keys: pa.Array, as_of: str) -> pa.Table:
        """``keys`` looked up by one service (or replica): one call per batch."""
        batches = [keys.slice(start, length) for start, length in self._batches(_value_bytes(keys))]
        if len(batches) > 1:
            return pa.concat_tables(self._stream(client, batches, as_of))
        request = pb.LookupRequest(table=self._table, keys=_keys_payload(keys), as_of_instant=as_of)
        answer = client.call(client.stub.Lookup, request).locations
        return _locations(answer, client.config.max_message_bytes)

    def _batches(self, row_bytes: np.ndarray) -> list[tuple[int, int]]:
        """(start, length) of consecutive rows: at most ``batch_keys`` rows whose bytes
        (``row_bytes`` plus the overhead of each) fit half the message limit, so a
        request and its answer both pass the channel however long the keys are."""
        budget = self._client.config.max_message_bytes // 2
        ends = np.cumsum(row_bytes + ROW_OVERHEAD_BYTES)
        batches: list[tuple[int, int]] = []
        start = 0
        while start < len(row_bytes):
            spent = ends[start - 1] if start else 0
            fitting = int(np.searchsorted(ends, spent + budget, side="right")) - start
            length = min(max(fitting, 1), self.batch_keys)
            batches.append((start, length))
            start += length
        return batches

    def _stream(self, client: Client, batches: list[pa.Array], as_of: str) -> list[pa.Table]:
        """One StreamLookup over ``batches``; a retry resends only unanswered batches."""
        answers: list[pa.Table] = []
        stub = client.stub

        def requests() -> Iterator[pb.StreamLookupRequest]:
            for batch in batches[len(answers) :]:
                yield pb.StreamLookupRequest(
                    table=self._table, keys=_keys_payload(batch), as_of_instant=as_of
                )

        def run(_: None, *, timeout: float, metadata: tuple[tuple[str, str], ...]) -> None:
            for response in stub.StreamLookup(requests(), timeout=timeout, metadata=metadata):
                answers.append(_locations(response.locations, client.config.max_message_bytes))

        timeout = client.config.timeout_s * len(batches)
        client.call(run, None, timeout=timeout)
        return answers


def _value_bytes(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Each row's string bytes in ``column`` (0 for a null)."""
    lengths = pc.fill_null(pc.binary_length(column), 0)
    return np.asarray(lengths.to_numpy(zero_copy_only=False), dtype=np.int64)


def _keys_payload(keys: pa.Array) -> bytes:
    return arrow_ipc.encode(pa.table({"key": keys}))


def _locations(payload: bytes, max_bytes: int) -> pa.Table:
    """The service's answer as plain string columns."""
    table = arrow_ipc.decode(payload, field=LOCATIONS_FIELD, max_bytes=max_bytes)
    return pa.table(
        {name: arrow_ipc.column(table, name, field=LOCATIONS_FIELD) for name in LOCATION_COLUMNS}
    )
