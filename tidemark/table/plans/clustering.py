"""Clustering plans: ``<ts>.replacecommit.requested`` in Hudi's encoding (on table
versions 8 and 9 ``<ts>.clustering.requested``: the timeline's ``CLUSTERING_ACTION``).

Hudi saves a scheduled clustering as a requested replacecommit whose content is an Avro
object container file with one ``HoodieRequestedReplaceMetadata`` record (operation type
``CLUSTER``) holding a ``HoodieClusteringPlan``: groups of file slices, each rewritten
into ``numOutputFileGroups`` new file groups, and the execution strategy with its
parameters. The schemas below are transcribed from hudi-common's
``HoodieRequestedReplaceMetadata.avsc``, ``HoodieClusteringPlan.avsc``,
``HoodieClusteringGroup.avsc``, ``HoodieSliceInfo.avsc`` and
``HoodieClusteringStrategy.avsc`` as Hudi 0.14 (table version 6) embeds them in its
requested replacecommits (nested records declared inline), so Hudi's tools see a pending
clustering and ours read Hudi's plans. docs/clustering.md describes the encoding.

A plan is pending while its instant is requested or inflight; writers skip it when
rolling back failed writes (``tidemark.table.writes.commit``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import fastavro
import structlog
from fastavro.types import Schema

from tidemark.checks import require_positive
from tidemark.config import MIB
from tidemark.errors import ConflictError, FailedPreconditionError, InvalidArgumentError
from tidemark.storage.damaged import read_parsed
from tidemark.table import HoodieTable
from tidemark.table.files.file_names import join_path
from tidemark.table.metadata.actions import REPLACE_COMMIT
from tidemark.table.metadata.avro import (
    METADATA_VERSION,
    NAMESPACE,
    VERSION_FIELD,
    read_single_record,
    write_single_record,
)
from tidemark.table.timeline.instant import Instant, new_instant_time

log = structlog.get_logger(__name__)

CLUSTER_OPERATION = "CLUSTER"
"""``WriteOperationType.CLUSTER.name()``: the operation type of a clustering request."""
EXECUTION_STRATEGY_CLASS = (
    "org.apache.hudi.client.clustering.run.strategy.SparkSortAndSizeExecutionStrategy"
)
"""Hudi stores the execution strategy (not the plan strategy) in the plan."""
SORT_COLUMNS_PARAM = "hoodie.clustering.plan.strategy.sort.columns"
LAYOUT_PARAM = "hoodie.layout.optimize.strategy"
TARGET_FILE_BYTES_PARAM = "hoodie.clustering.plan.strategy.target.file.max.bytes"
LAYOUTS: dict[str, str] = {"linear": "linear", "zorder": "z-order", "hilbert": "hilbert"}
"""Our layout names -> the values of Hudi's ``hoodie.layout.optimize.strategy``."""
SLICE_BYTES_METRIC = "tidemark.sliceBytes."
"""Group metric ``tidemark.sliceBytes.<fileId>``: a slice's size in bytes, base file and
log files (Hudi's plan has no per-slice size; its readers ignore unknown metrics)."""
SLICE_LOG_BYTES_METRIC = "tidemark.sliceLogBytes."
"""Group metric ``tidemark.sliceLogBytes.<fileId>``: a merge-on-read slice's log bytes."""

_STRING_MAP = ["null", {"type": "map", "values": "string"}]
_OPTIONAL_STRING = ["null", "string"]

_SLICE_INFO = {
    "type": "record",
    "name": "HoodieSliceInfo",
    "namespace": NAMESPACE,
    "fields": [
        {"name": "dataFilePath", "type": _OPTIONAL_STRING, "default": None},
        {
            "name": "deltaFilePaths",
            "type": ["null", {"type": "array", "items": "string"}],
            "default": None,
        },
        {"name": "fileId", "type": _OPTIONAL_STRING},
        {"name": "partitionPath", "type": _OPTIONAL_STRING, "default": None},
        {"name": "bootstrapFilePath", "type": _OPTIONAL_STRING, "default": None},
        VERSION_FIELD,
    ],
}
_CLUSTERING_GROUP = {
    "type": "record",
    "name": "HoodieClusteringGroup",
    "namespace": NAMESPACE,
    "fields": [
        {
            "name": "slices",
            "type": ["null", {"type": "array", "items": _SLICE_INFO}],
            "default": None,
        },
        {"name": "metrics", "type": ["null", {"type": "map", "values": "double"}], "default": None},
        {"name": "numOutputFileGroups", "type": ["int", "null"], "default": 1},
        {"name": "extraMetadata", "type": _STRING_MAP, "default": None},
        VERSION_FIELD,
    ],
}
_CLUSTERING_STRATEGY = {
    "type": "record",
    "name": "HoodieClusteringStrategy",
    "namespace": NAMESPACE,
    "fields": [
        {"name": "strategyClassName", "type": _OPTIONAL_STRING, "default": None},
        {"name": "strategyParams", "type": _STRING_MAP, "default": None},
        VERSION_FIELD,
    ],
}
_CLUSTERING_PLAN = {
    "type": "record",
    "name": "HoodieClusteringPlan",
    "namespace": NAMESPACE,
    "fields": [
        {
            "name": "inputGroups",
            "type": ["null", {"type": "array", "items": _CLUSTERING_GROUP}],
            "default": None,
        },
        {"name": "strategy", "type": ["null", _CLUSTERING_STRATEGY], "default": None},
        {"name": "extraMetadata", "type": _STRING_MAP, "default": None},
        VERSION_FIELD,
        {"name": "preserveHoodieMetadata", "type": ["null", "boolean"], "default": None},
    ],
}
REQUESTED_REPLACE_SCHEMA: Schema = fastavro.parse_schema(
    {
        "type": "record",
        "name": "HoodieRequestedReplaceMetadata",
        "namespace": NAMESPACE,
        "fields": [
            {"name": "operationType", "type": _OPTIONAL_STRING, "default": None},
            {"name": "clusteringPlan", "type": ["null", _CLUSTERING_PLAN], "default": None},
            {"name": "extraMetadata", "type": _STRING_MAP, "default": None},
            VERSION_FIELD,
        ],
    }
)


class SliceInfo(NamedTuple):
    """One file slice to rewrite: a file group's latest base file and, on merge-on-read
    tables, the log files merged into it (``logs``, in order; Hudi's ``deltaFilePaths``).
    Paths are table-relative; the Avro form holds full paths. ``size_bytes`` counts the
    base file and the logs, ``log_bytes`` the logs alone. A named tuple: a planner builds
    one per small file, 100k of them in milliseconds."""

    partition_path: str
    file_id: str
    path: str
    size_bytes: int
    logs: tuple[str, ...] = ()
    log_bytes: int = 0


@dataclass(frozen=True)
class ClusteringGroup:
    """Slices of one partition rewritten together into ``num_output_file_groups`` files."""

    slices: tuple[SliceInfo, ...]
    num_output_file_groups: int

    def __post_init__(self) -> None:
        if not self.slices:
            raise InvalidArgumentError("a clustering group needs slices", field="slices")
        if len({s.partition_path for s in self.slices}) != 1:
            raise InvalidArgumentError(
                "the slices of a clustering group must share one partition", field="slices"
            )
        require_positive("num_output_file_groups", self.num_output_file_groups)

    @property
    def partition_path(self) -> str:
        return self.slices[0].partition_path

    @property
    def size_bytes(self) -> int:
        return sum(s.size_bytes for s in self.slices)

    def metrics(self) -> dict[str, float]:
        """Hudi's group metrics (``ClusteringPlanStrategy.buildMetrics``) plus slice sizes."""
        read_mb = self.size_bytes / MIB
        metrics = {
            "TOTAL_IO_READ_MB": read_mb,
            "TOTAL_IO_WRITE_MB": read_mb,
            "TOTAL_IO_MB": 2 * read_mb,
            "TOTAL_LOG_FILE_SIZE": float(sum(s.log_bytes for s in self.slices)),
            "TOTAL_LOG_FILES": float(sum(len(s.logs) for s in self.slices)),
        }
        metrics.update({SLICE_BYTES_METRIC + s.file_id: float(s.size_bytes) for s in self.slices})
        metrics.update(
            {SLICE_LOG_BYTES_METRIC + s.file_id: float(s.log_bytes) for s in self.slices if s.logs}
        )
        return metrics


@dataclass(frozen=True)
class ClusteringStrategy:
    """How the executor rewrites each group: order rows by ``sort_columns`` along
    ``layout`` (linear, zorder, hilbert) and write files of ``target_file_bytes``.
    ``extra_params`` keeps other strategy parameters of a plan Hudi wrote."""

    sort_columns: tuple[str, ...]
    layout: str
    target_file_bytes: int
    class_name: str = EXECUTION_STRATEGY_CLASS
    extra_params: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise InvalidArgumentError(
                f"unknown layout {self.layout!r} (use {', '.join(LAYOUTS)})", field="layout"
            )
        require_positive("target_file_bytes", self.target_file_bytes)

    def params(self) -> dict[str, str]:
        params = dict(self.extra_params)
        if self.sort_columns:
            params[SORT_COLUMNS_PARAM] = ",".join(self.sort_columns)
        params[LAYOUT_PARAM] = LAYOUTS[self.layout]
        params[TARGET_FILE_BYTES_PARAM] = str(self.target_file_bytes)
        return params

    @classmethod
    def from_params(cls, class_name: str, params: Mapping[str, str]) -> ClusteringStrategy:
        """Read our parameters back (Hudi's defaults for a plan that lacks them: linear
        layout, 1 GiB files)."""
        extra = dict(params)
        columns = extra.pop(SORT_COLUMNS_PARAM, "")
        layout_value = extra.pop(LAYOUT_PARAM, LAYOUTS["linear"]).lower()
        layouts = {hudi: ours for ours, hudi in LAYOUTS.items()} | {"zorder": "zorder"}
        if layout_value not in layouts:
            raise InvalidArgumentError(
                f"unknown {LAYOUT_PARAM} {layout_value!r} in the plan", field="metadata"
            )
        target = extra.pop(TARGET_FILE_BYTES_PARAM, str(1024 * MIB))
        if not target.isdigit():
            raise InvalidArgumentError(
                f"{TARGET_FILE_BYTES_PARAM} {target!r} is not a size", field="metadata"
            )
        return cls(
            sort_columns=tuple(c.strip() for c in columns.split(",") if c.strip()),
            layout=layouts[layout_value],
            target_file_bytes=int(target),
            class_name=class_name,
            extra_params=extra,
        )


@dataclass(frozen=True)
class ClusteringPlan:
    groups: tuple[ClusteringGroup, ...]
    strategy: ClusteringStrategy
    extra_metadata: Mapping[str, str] = field(default_factory=dict)
    preserve_hoodie_metadata: bool = True
    """Clustering keeps each record's meta columns (commit time, sequence number)."""

    def __post_init__(self) -> None:
        if not self.groups:
            raise InvalidArgumentError("a clustering plan needs groups", field="groups")
        keys = [(s.partition_path, s.file_id) for group in self.groups for s in group.slices]
        if len(set(keys)) == len(keys):
            return
        repeated = next(key for key, count in Counter(keys).items() if count > 1)
        raise InvalidArgumentError(
            f"file group {repeated[1]} of partition {repeated[0]!r} is in more than one "
            "slice of the plan",
            field="groups",
        )

    def file_groups(self) -> set[tuple[str, str]]:
        """(partition path, file id) of every file group the plan rewrites."""
        return {(s.partition_path, s.file_id) for g in self.groups for s in g.slices}

    @property
    def num_slices(self) -> int:
        return sum(len(g.slices) for g in self.groups)

    @property
    def size_bytes(self) -> int:
        return sum(g.size_bytes for g in self.groups)

    @property
    def num_output_file_groups(self) -> int:
        return sum(g.num_output_file_groups for g in self.groups)

    def to_avro(self, table_uri: str) -> bytes:
        """The ``<ts>.replacecommit.requested`` content; data and log file paths are
        made full with ``table_uri`` as Hudi stores them."""
        base = table_uri.rstrip("/")
        plan = {
            "inputGroups": [
                {
                    "slices": [
                        {
                            "dataFilePath": f"{base}/{s.path}",
                            "deltaFilePaths": [f"{base}/{log}" for log in s.logs],
                            "fileId": s.file_id,
                            "partitionPath": s.partition_path,
                            "bootstrapFilePath": "",
                            "version": METADATA_VERSION,
                        }
                        for s in group.slices
                    ],
                    "metrics": group.metrics(),
                    "numOutputFileGroups": group.num_output_file_groups,
                    "extraMetadata": {},
                    "version": METADATA_VERSION,
                }
                for group in self.groups
            ],
            "strategy": {
                "strategyClassName": self.strategy.class_name,
                "strategyParams": self.strategy.params(),
                "version": METADATA_VERSION,
            },
            "extraMetadata": dict(self.extra_metadata),
            "version": METADATA_VERSION,
            "preserveHoodieMetadata": self.preserve_hoodie_metadata,
        }
        record = {
            "operationType": CLUSTER_OPERATION,
            "clusteringPlan": plan,
            "extraMetadata": {},
            "version": METADATA_VERSION,
        }
        return write_single_record(REQUESTED_REPLACE_SCHEMA, record)

    @classmethod
    def from_avro(cls, data: bytes) -> ClusteringPlan:
        """Decode a requested replacecommit holding a clustering plan (ours or Hudi's);
        InvalidArgumentError(field="metadata") when it holds none."""
        plan = plan_of_request(data)
        if plan is None:
            raise InvalidArgumentError(
                "the requested replacecommit holds no clustering plan", field="metadata"
            )
        return plan


@dataclass(frozen=True)
class PendingPlan:
    """A scheduled clustering not yet completed: requested, or inflight while it runs."""

    instant: Instant
    plan: ClusteringPlan

    @property
    def timestamp(self) -> str:
        return self.instant.timestamp


def plan_of_request(data: bytes) -> ClusteringPlan | None:
    """The clustering plan in a replacecommit's requested file; None when the file is
    empty or requests another operation (Hudi's insert_overwrite)."""
    if not data.strip():
        return None
    record = read_single_record(REQUESTED_REPLACE_SCHEMA, data, "requested replace metadata")
    plan = record.get("clusteringPlan")
    if record.get("operationType") != CLUSTER_OPERATION or not plan:
        return None
    return _plan_from_record(plan)


def _plan_from_record(plan: Mapping[str, Any]) -> ClusteringPlan:
    strategy = plan.get("strategy") or {}
    groups = []
    for group in plan.get("inputGroups") or []:
        metrics = group.get("metrics") or {}
        slices = tuple(_slice_from_record(piece, metrics) for piece in group.get("slices") or [])
        groups.append(ClusteringGroup(slices, group.get("numOutputFileGroups") or 1))
    return ClusteringPlan(
        groups=tuple(groups),
        strategy=ClusteringStrategy.from_params(
            strategy.get("strategyClassName") or EXECUTION_STRATEGY_CLASS,
            strategy.get("strategyParams") or {},
        ),
        extra_metadata=plan.get("extraMetadata") or {},
        preserve_hoodie_metadata=bool(plan.get("preserveHoodieMetadata")),
    )


def _slice_from_record(piece: Mapping[str, Any], metrics: Mapping[str, float]) -> SliceInfo:
    """The table-relative paths are the partition plus the file names of ``dataFilePath``
    and ``deltaFilePaths``: the full paths' scheme and base spelling depend on the writer
    (``file:/``, ``s3a://``). A plan without our size metric (Hudi's) has size 0."""
    file_id = piece.get("fileId") or ""
    partition = piece.get("partitionPath") or ""
    data_path = piece.get("dataFilePath") or ""
    if not file_id or not data_path:
        raise InvalidArgumentError(
            "a slice of the clustering plan has no fileId or dataFilePath", field="metadata"
        )
    return SliceInfo(
        partition_path=partition,
        file_id=file_id,
        path=join_path(partition, data_path.rpartition("/")[2]),
        size_bytes=int(metrics.get(SLICE_BYTES_METRIC + file_id, 0)),
        log_bytes=int(metrics.get(SLICE_LOG_BYTES_METRIC + file_id, 0)),
        logs=tuple(
            join_path(partition, log.rpartition("/")[2])
            for log in piece.get("deltaFilePaths") or []
        ),
    )


def pending_plans(table: HoodieTable, *, reload: bool = True) -> list[PendingPlan]:
    """Every pending clustering plan on the timeline (reloaded first unless the caller
    just did), oldest first: requested or inflight instants of the layout's clustering
    action (on table versions 8 and 9, ``clustering``) holding a plan."""
    timeline = table.timeline
    if reload:
        timeline.refresh()
    pending = []
    for instant in timeline.pending():
        plan = plan_of(table, instant)
        if plan is not None:
            pending.append(PendingPlan(instant, plan))
    return pending


def plan_of(table: HoodieTable, instant: Instant) -> ClusteringPlan | None:
    """The clustering plan ``instant`` carries (pending, or completed as a replacecommit),
    or None: another action, or a replacecommit without a plan (Hudi's insert_overwrite)."""
    timeline = table.timeline
    if instant.action not in (REPLACE_COMMIT, timeline.CLUSTERING_ACTION):
        return None
    return read_parsed(table.storage, timeline.requested(instant).path, plan_of_request)


def pending_plan(table: HoodieTable, timestamp: str) -> PendingPlan:
    """The pending plan at ``timestamp``; FailedPreconditionError(field="instant") naming
    what the instant is when it is not one, NotFoundError when there is no such instant."""
    for candidate in pending_plans(table):
        if candidate.timestamp == timestamp:
            return candidate
    instant = table.timeline.find(timestamp)
    state = "completed" if instant.is_completed else instant.state.name.lower()
    raise FailedPreconditionError(
        f"instant {timestamp} is a {state} {instant.action}, not a pending clustering plan",
        field="instant",
    )


def file_groups_in(plans: Iterable[PendingPlan]) -> dict[tuple[str, str], str]:
    """(partition path, file id) -> the instant of the pending plan holding it."""
    return {key: p.timestamp for p in plans for key in p.plan.file_groups()}


def save_plan(table: HoodieTable, plan: ClusteringPlan) -> Instant:
    """Write ``plan`` as a new requested instant of the timeline's clustering action
    (``<ts>.replacecommit.requested``, on versions 8 and 9 ``<ts>.clustering.requested``).
    The caller holds the table lock (its fence set on the timeline): the pending plans are
    read again here, and a plan overlapping one of them is refused, so two schedulers never
    plan the same file group; the create itself passes the fencing check."""
    timeline = table.timeline
    if timeline.fence is None:
        raise FailedPreconditionError(
            "saving a clustering plan requires the table lock", field="lock"
        )
    taken = file_groups_in(pending_plans(table))
    overlap = sorted(plan.file_groups() & taken.keys())
    if overlap:
        partition, file_id = overlap[0]
        raise ConflictError(
            f"file group {file_id} of partition {partition!r} is already in pending "
            f"clustering plan {taken[(partition, file_id)]}",
            field="plan",
        )
    timestamp = new_instant_time(after=timeline.latest_timestamp())
    payload = plan.to_avro(table.uri)
    instant = timeline.create_requested(timestamp, timeline.CLUSTERING_ACTION, payload)
    log.info(
        "clustering.plan_saved",
        table=table.uri,
        instant=timestamp,
        groups=len(plan.groups),
        files=plan.num_slices,
        bytes=plan.size_bytes,
    )
    return instant


REPLACES_KEY = "tidemark.replaces"
"""``clusteringPlan.extraMetadata`` key naming the plans a replacing plan was cut from,
comma-separated, oldest first."""


def replaced_by(pending: PendingPlan) -> list[str]:
    """The instants of the plans ``pending`` replaces (none for a plan as scheduled)."""
    value = pending.plan.extra_metadata.get(REPLACES_KEY, "")
    return [instant for instant in value.split(",") if instant]


def without_file_groups(
    pending: PendingPlan, given_up: Iterable[tuple[str, str]]
) -> ClusteringPlan | None:
    """``pending``'s plan without the file groups ``given_up`` (to a writer), naming the
    plan it replaces in its extra metadata; None when nothing is left to cluster. A
    group's output files shrink with its input (when its slice sizes are known)."""
    gone = set(given_up)
    target = pending.plan.strategy.target_file_bytes
    groups = []
    for group in pending.plan.groups:
        kept = tuple(s for s in group.slices if (s.partition_path, s.file_id) not in gone)
        if not kept:
            continue
        outputs = group.num_output_file_groups
        size = sum(s.size_bytes for s in kept)
        if size:
            outputs = min(outputs, num_output_file_groups(size, target))
        groups.append(ClusteringGroup(kept, outputs))
    if not groups:
        return None
    return replace(
        pending.plan,
        groups=tuple(groups),
        extra_metadata={
            **pending.plan.extra_metadata,
            REPLACES_KEY: ",".join([*replaced_by(pending), pending.timestamp]),
        },
    )


def num_output_file_groups(group_bytes: int, target_file_bytes: int) -> int:
    """Hudi's ``ceil(groupBytes / targetFileMaxBytes)``, at least one file."""
    return max(1, math.ceil(group_bytes / target_file_bytes))
