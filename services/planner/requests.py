"""Validation of planner requests: bad input is an InvalidArgumentError naming its field,
raised before anything touches the table."""

from __future__ import annotations

from tidemark.checks import require_positive
from tidemark.clustering.layouts import LAYOUT_NAMES
from tidemark.clustering.strategy import (
    ALL_PARTITIONS,
    DEFAULT_MAX_BYTES_PER_GROUP,
    DEFAULT_MAX_GROUPS,
    DEFAULT_SMALL_FILE_LIMIT_BYTES,
    DEFAULT_TARGET_FILE_BYTES,
    PartitionFilter,
    PlanOptions,
)
from tidemark.config import ServerConfig
from tidemark.errors import InvalidArgumentError
from tidemark.proto.planner.v1 import planner_service_pb2 as pb
from tidemark.rpc.requests import table_uri
from tidemark.services.planner.policy import TriggerPolicy
from tidemark.table.timeline.instant import validate_instant_time

LAYOUTS: dict[pb.Layout, str] = {pb.LAYOUT_UNSPECIFIED: "linear", **LAYOUT_NAMES}


def table(ref_base_path: str, config: ServerConfig) -> str:
    """The canonical table URI, checked against the server's allowed roots."""
    return table_uri(ref_base_path, config, field="table.base_path")


def instant_time(value: str) -> str:
    return validate_instant_time(value, field="instant_time")


def plan_options(message: pb.PlanOptions, field: str = "options") -> PlanOptions:
    layout = LAYOUTS.get(message.layout)
    if layout is None:
        raise InvalidArgumentError(f"unknown layout {message.layout}", field=f"{field}.layout")
    for position, column in enumerate(message.sort_columns):
        if not column.strip():
            raise InvalidArgumentError(
                "must not be empty", field=f"{field}.sort_columns[{position}]"
            )

    def sized(name: str, default: int) -> int:
        return getattr(message, name) if message.HasField(name) else default

    try:
        return PlanOptions(
            sort_columns=tuple(message.sort_columns),
            layout=layout,
            partitions=partition_filter(message.partitions, f"{field}.partitions"),
            target_file_bytes=sized("target_file_bytes", DEFAULT_TARGET_FILE_BYTES),
            small_file_limit_bytes=sized("small_file_limit_bytes", DEFAULT_SMALL_FILE_LIMIT_BYTES),
            max_bytes_per_group=sized("max_bytes_per_group", DEFAULT_MAX_BYTES_PER_GROUP),
            max_groups=sized("max_groups", DEFAULT_MAX_GROUPS),
            hot_commits=message.hot_commits if message.HasField("hot_commits") else None,
            hot_minutes=message.hot_minutes if message.HasField("hot_minutes") else None,
        )
    except InvalidArgumentError as error:
        if error.field is None or error.field.startswith(f"{field}."):
            raise
        raise InvalidArgumentError(error.message, field=f"{field}.{error.field}") from None


def partition_filter(message: pb.PartitionFilter, field: str) -> PartitionFilter:
    kind = message.WhichOneof("filter")
    if kind == "recent":
        return PartitionFilter.recent(message.recent.count, f"{field}.recent.count")
    if kind == "regex":
        return PartitionFilter.regex(message.regex, f"{field}.regex")
    if kind == "list":
        return PartitionFilter.listed(list(message.list.partition_paths), f"{field}.list")
    return ALL_PARTITIONS


def trigger_policy(message: pb.TriggerPolicy) -> TriggerPolicy:
    options = plan_options(message.options, "policy.options")
    kind = message.WhichOneof("trigger")
    if kind == "every_n_commits":
        require_positive("policy.every_n_commits", message.every_n_commits)
        return TriggerPolicy(every_n_commits=message.every_n_commits, options=options)
    if kind == "every_seconds":
        require_positive("policy.every_seconds", message.every_seconds)
        return TriggerPolicy(every_seconds=message.every_seconds, options=options)
    return TriggerPolicy(options=options)
