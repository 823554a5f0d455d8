"""Client side of the index service: ``IndexClient`` for a writer's executors (tagging
keys, staging a commit's changes by shard), its driver (status, discarding a
rolled-back instant) and operators (stats, compaction).

Picklable: only the address and the table travel, the channel opens lazily in the
process that uses it. Keys go out and locations come back as Arrow IPC (see
``tidemark.rpc.arrow_ipc``) in batches of ``batch_keys``; one batch is a unary call,
more are one StreamLookup call that, when the service becomes unreachable mid-stream,
is retried from the first unanswered batch. Every call is idempotent (a stage call
writes the same delta files again), so retries are always safe.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence

import pyarrow as pa

from tidemark.config import ClientConfig
from tidemark.index.build import BuildStatus
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
LOCATION_COLUMNS = ("partition", "file_id", "instant")
LOCATIONS_FIELD = "locations"


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
    """The record index of one table through the service at ``address``."""

    def __init__(
        self,
        address: str,
        table_uri: str,
        config: ClientConfig | None = None,
        *,
        batch_keys: int = BATCH_KEYS,
    ) -> None:
        self._client = ServiceClient(INDEX_SERVICE, address, IndexServiceStub, config)
        self._table = TableRef(base_path=canonical_uri(table_uri))
        self.batch_keys = batch_keys

    @property
    def address(self) -> str:
        return self._client.address

    def check_reachable(self) -> None:
        self._client.check_reachable()

    def lookup(
        self, keys: Sequence[str] | pa.Array | pa.ChunkedArray, as_of: str | None = None
    ) -> pa.Table:
        """Each key's location: columns key, partition, file_id, instant (null when the key
        is absent), in the order of ``keys``. ``as_of``: the newest completed instant the
        caller has seen, so the service answers at least as of it."""
        if isinstance(keys, pa.ChunkedArray):
            keys = keys.combine_chunks()
        array = keys if isinstance(keys, pa.Array) else pa.array(keys, pa.string())
        batches = [
            array.slice(start, self.batch_keys) for start in range(0, len(array), self.batch_keys)
        ]
        if not batches:
            answers = [pa.table({name: pa.array([], pa.string()) for name in LOCATION_COLUMNS})]
        elif len(batches) == 1:
            request = pb.LookupRequest(
                table=self._table, keys=_keys_payload(array), as_of_instant=as_of or ""
            )
            response = self._client.call(self._client.stub.Lookup, request)
            answers = [_locations(response.locations)]
        else:
            answers = self._stream(batches, as_of or "")
        located = pa.concat_tables(answers)
        return pa.table({"key": array, **{name: located[name] for name in LOCATION_COLUMNS}})

    def stage(self, instant: str, changes: pa.Table) -> int:
        """Stage ``changes`` (key, partition, file_id; both null = delete) for ``instant``,
        visible once it completes; returns how many were staged."""
        staged = 0
        for start in range(0, len(changes), self.batch_keys):
            request = pb.StageChangesRequest(
                table=self._table,
                instant_time=instant,
                changes=arrow_ipc.encode(changes.slice(start, self.batch_keys)),
            )
            staged += self._client.call(self._client.stub.StageChanges, request).staged
        return staged

    def discard(self, instant: str) -> bool:
        """Delete what was staged for a never-completed ``instant``; whether there was any."""
        request = pb.DiscardInstantRequest(table=self._table, instant_time=instant)
        return bool(self._client.call(self._client.stub.DiscardInstant, request).discarded)

    def status(self) -> BuildStatus:
        request = pb.BuildStatusRequest(table=self._table)
        response = self._client.call(self._client.stub.BuildStatus, request)
        return BuildStatus(
            response.exists,
            response.shards,
            response.as_of_instant,
            response.build_in_progress,
            response.format_version,
        )

    def stats(self) -> IndexStats:
        response = self._client.call(self._client.stub.Stats, pb.StatsRequest(table=self._table))
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
        """Fold the visible deltas of shards with at least ``min_deltas`` of them now."""
        request = pb.CompactRequest(table=self._table, min_deltas=min_deltas)
        response = self._client.call(self._client.stub.Compact, request)
        return Compaction(
            response.shards_compacted, response.deltas_folded, response.manifests_deleted
        )

    def _stream(self, batches: list[pa.Array], as_of: str) -> list[pa.Table]:
        """One StreamLookup over ``batches``; a retry resends only unanswered batches."""
        answers: list[pa.Table] = []
        stub = self._client.stub

        def requests() -> Iterator[pb.StreamLookupRequest]:
            for batch in batches[len(answers) :]:
                yield pb.StreamLookupRequest(
                    table=self._table, keys=_keys_payload(batch), as_of_instant=as_of
                )

        def run(_: None, *, timeout: float, metadata: tuple[tuple[str, str], ...]) -> None:
            for response in stub.StreamLookup(requests(), timeout=timeout, metadata=metadata):
                answers.append(_locations(response.locations))

        timeout = self._client.config.timeout_s * len(batches)
        self._client.call(run, None, timeout=timeout)
        return answers


def _keys_payload(keys: pa.Array) -> bytes:
    return arrow_ipc.encode(pa.table({"key": keys}))


def _locations(payload: bytes) -> pa.Table:
    """The service's answer as plain string columns."""
    table = arrow_ipc.decode(payload, field=LOCATIONS_FIELD)
    return pa.table(
        {name: arrow_ipc.column(table, name, field=LOCATIONS_FIELD) for name in LOCATION_COLUMNS}
    )
