from tidemark.proto.common.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Layout(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LAYOUT_UNSPECIFIED: _ClassVar[Layout]
    LAYOUT_LINEAR: _ClassVar[Layout]
    LAYOUT_ZORDER: _ClassVar[Layout]
    LAYOUT_HILBERT: _ClassVar[Layout]

class PlanState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PLAN_STATE_UNSPECIFIED: _ClassVar[PlanState]
    PLAN_STATE_REQUESTED: _ClassVar[PlanState]
    PLAN_STATE_INFLIGHT: _ClassVar[PlanState]

class CompactionTrigger(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COMPACTION_TRIGGER_UNSPECIFIED: _ClassVar[CompactionTrigger]
    COMPACTION_TRIGGER_NUM_COMMITS: _ClassVar[CompactionTrigger]
    COMPACTION_TRIGGER_TIME_ELAPSED: _ClassVar[CompactionTrigger]
    COMPACTION_TRIGGER_NUM_AND_TIME: _ClassVar[CompactionTrigger]
    COMPACTION_TRIGGER_NUM_OR_TIME: _ClassVar[CompactionTrigger]
LAYOUT_UNSPECIFIED: Layout
LAYOUT_LINEAR: Layout
LAYOUT_ZORDER: Layout
LAYOUT_HILBERT: Layout
PLAN_STATE_UNSPECIFIED: PlanState
PLAN_STATE_REQUESTED: PlanState
PLAN_STATE_INFLIGHT: PlanState
COMPACTION_TRIGGER_UNSPECIFIED: CompactionTrigger
COMPACTION_TRIGGER_NUM_COMMITS: CompactionTrigger
COMPACTION_TRIGGER_TIME_ELAPSED: CompactionTrigger
COMPACTION_TRIGGER_NUM_AND_TIME: CompactionTrigger
COMPACTION_TRIGGER_NUM_OR_TIME: CompactionTrigger

class AllPartitions(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RecentPartitions(_message.Message):
    __slots__ = ("count",)
    COUNT_FIELD_NUMBER: _ClassVar[int]
    count: int
    def __init__(self, count: _Optional[int] = ...) -> None: ...

class PartitionList(_message.Message):
    __slots__ = ("partition_paths",)
    PARTITION_PATHS_FIELD_NUMBER: _ClassVar[int]
    partition_paths: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, partition_paths: _Optional[_Iterable[str]] = ...) -> None: ...

class PartitionFilter(_message.Message):
    __slots__ = ("all", "recent", "regex", "list")
    ALL_FIELD_NUMBER: _ClassVar[int]
    RECENT_FIELD_NUMBER: _ClassVar[int]
    REGEX_FIELD_NUMBER: _ClassVar[int]
    LIST_FIELD_NUMBER: _ClassVar[int]
    all: AllPartitions
    recent: RecentPartitions
    regex: str
    list: PartitionList
    def __init__(self, all: _Optional[_Union[AllPartitions, _Mapping]] = ..., recent: _Optional[_Union[RecentPartitions, _Mapping]] = ..., regex: _Optional[str] = ..., list: _Optional[_Union[PartitionList, _Mapping]] = ...) -> None: ...

class PlanOptions(_message.Message):
    __slots__ = ("sort_columns", "layout", "partitions", "target_file_bytes", "small_file_limit_bytes", "max_bytes_per_group", "max_groups", "hot_commits", "hot_minutes")
    SORT_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    TARGET_FILE_BYTES_FIELD_NUMBER: _ClassVar[int]
    SMALL_FILE_LIMIT_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_PER_GROUP_FIELD_NUMBER: _ClassVar[int]
    MAX_GROUPS_FIELD_NUMBER: _ClassVar[int]
    HOT_COMMITS_FIELD_NUMBER: _ClassVar[int]
    HOT_MINUTES_FIELD_NUMBER: _ClassVar[int]
    sort_columns: _containers.RepeatedScalarFieldContainer[str]
    layout: Layout
    partitions: PartitionFilter
    target_file_bytes: int
    small_file_limit_bytes: int
    max_bytes_per_group: int
    max_groups: int
    hot_commits: int
    hot_minutes: int
    def __init__(self, sort_columns: _Optional[_Iterable[str]] = ..., layout: _Optional[_Union[Layout, str]] = ..., partitions: _Optional[_Union[PartitionFilter, _Mapping]] = ..., target_file_bytes: _Optional[int] = ..., small_file_limit_bytes: _Optional[int] = ..., max_bytes_per_group: _Optional[int] = ..., max_groups: _Optional[int] = ..., hot_commits: _Optional[int] = ..., hot_minutes: _Optional[int] = ...) -> None: ...

class PlanSlice(_message.Message):
    __slots__ = ("file_id", "path", "size_bytes")
    FILE_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    file_id: str
    path: str
    size_bytes: int
    def __init__(self, file_id: _Optional[str] = ..., path: _Optional[str] = ..., size_bytes: _Optional[int] = ...) -> None: ...

class PlanGroup(_message.Message):
    __slots__ = ("partition_path", "slices", "num_output_file_groups", "size_bytes")
    PARTITION_PATH_FIELD_NUMBER: _ClassVar[int]
    SLICES_FIELD_NUMBER: _ClassVar[int]
    NUM_OUTPUT_FILE_GROUPS_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    partition_path: str
    slices: _containers.RepeatedCompositeFieldContainer[PlanSlice]
    num_output_file_groups: int
    size_bytes: int
    def __init__(self, partition_path: _Optional[str] = ..., slices: _Optional[_Iterable[_Union[PlanSlice, _Mapping]]] = ..., num_output_file_groups: _Optional[int] = ..., size_bytes: _Optional[int] = ...) -> None: ...

class Plan(_message.Message):
    __slots__ = ("instant_time", "state", "groups", "sort_columns", "layout", "target_file_bytes", "num_files", "size_bytes", "num_output_file_groups", "protected")
    INSTANT_TIME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    SORT_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_FIELD_NUMBER: _ClassVar[int]
    TARGET_FILE_BYTES_FIELD_NUMBER: _ClassVar[int]
    NUM_FILES_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    NUM_OUTPUT_FILE_GROUPS_FIELD_NUMBER: _ClassVar[int]
    PROTECTED_FIELD_NUMBER: _ClassVar[int]
    instant_time: str
    state: PlanState
    groups: _containers.RepeatedCompositeFieldContainer[PlanGroup]
    sort_columns: _containers.RepeatedScalarFieldContainer[str]
    layout: Layout
    target_file_bytes: int
    num_files: int
    size_bytes: int
    num_output_file_groups: int
    protected: bool
    def __init__(self, instant_time: _Optional[str] = ..., state: _Optional[_Union[PlanState, str]] = ..., groups: _Optional[_Iterable[_Union[PlanGroup, _Mapping]]] = ..., sort_columns: _Optional[_Iterable[str]] = ..., layout: _Optional[_Union[Layout, str]] = ..., target_file_bytes: _Optional[int] = ..., num_files: _Optional[int] = ..., size_bytes: _Optional[int] = ..., num_output_file_groups: _Optional[int] = ..., protected: _Optional[bool] = ...) -> None: ...

class GivenUpPlan(_message.Message):
    __slots__ = ("instant_time", "write_instant_time", "file_groups_taken", "replacement_instant_time")
    INSTANT_TIME_FIELD_NUMBER: _ClassVar[int]
    WRITE_INSTANT_TIME_FIELD_NUMBER: _ClassVar[int]
    FILE_GROUPS_TAKEN_FIELD_NUMBER: _ClassVar[int]
    REPLACEMENT_INSTANT_TIME_FIELD_NUMBER: _ClassVar[int]
    instant_time: str
    write_instant_time: str
    file_groups_taken: int
    replacement_instant_time: str
    def __init__(self, instant_time: _Optional[str] = ..., write_instant_time: _Optional[str] = ..., file_groups_taken: _Optional[int] = ..., replacement_instant_time: _Optional[str] = ...) -> None: ...

class SchedulePlanRequest(_message.Message):
    __slots__ = ("table", "options")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableRef
    options: PlanOptions
    def __init__(self, table: _Optional[_Union[_common_pb2.TableRef, _Mapping]] = ..., options: _Optional[_Union[PlanOptions, _Mapping]] = ...) -> None: ...

class SchedulePlanResponse(_message.Message):
    __slots__ = ("plan", "reason")
    PLAN_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    plan: Plan
    reason: str
    def __init__(self, plan: _Optional[_Union[Plan, _Mapping]] = ..., reason: _Optional[str] = ...) -> None: ...

class ListPlansRequest(_message.Message):
    __slots__ = ("table",)
    TABLE_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableRef
    def __init__(self, table: _Optional[_Union[_common_pb2.TableRef, _Mapping]] = ...) -> None: ...

class ListPlansResponse(_message.Message):
    __slots__ = ("plans", "given_up")
    PLANS_FIELD_NUMBER: _ClassVar[int]
    GIVEN_UP_FIELD_NUMBER: _ClassVar[int]
    plans: _containers.RepeatedCompositeFieldContainer[Plan]
    given_up: _containers.RepeatedCompositeFieldContainer[GivenUpPlan]
    def __init__(self, plans: _Optional[_Iterable[_Union[Plan, _Mapping]]] = ..., given_up: _Optional[_Iterable[_Union[GivenUpPlan, _Mapping]]] = ...) -> None: ...

class GetPlanRequest(_message.Message):
    __slots__ = ("table", "instant_time")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    INSTANT_TIME_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableRef
    instant_time: str
    def __init__(self, table: _Optional[_Union[_common_pb2.TableRef, _Mapping]] = ..., instant_time: _Optional[str] = ...) -> None: ...

class GetPlanResponse(_message.Message):
    __slots__ = ("plan",)
    PLAN_FIELD_NUMBER: _ClassVar[int]
    plan: Plan
    def __init__(self, plan: _Optional[_Union[Plan, _Mapping]] = ...) -> None: ...

class CancelPlanRequest(_message.Message):
    __slots__ = ("table", "instant_time")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    INSTANT_TIME_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableRef
    instant_time: str
    def __init__(self, table: _Optional[_Union[_common_pb2.TableRef, _Mapping]] = ..., instant_time: _Optional[str] = ...) -> None: ...

class CancelPlanResponse(_message.Message):
    __slots__ = ("rollback_instant_time",)
    ROLLBACK_INSTANT_TIME_FIELD_NUMBER: _ClassVar[int]
    rollback_instant_time: str
    def __init__(self, rollback_instant_time: _Optional[str] = ...) -> None: ...

class OnDemand(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TriggerPolicy(_message.Message):
    __slots__ = ("on_demand", "every_n_commits", "every_seconds", "options")
    ON_DEMAND_FIELD_NUMBER: _ClassVar[int]
    EVERY_N_COMMITS_FIELD_NUMBER: _ClassVar[int]
    EVERY_SECONDS_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    on_demand: OnDemand
    every_n_commits: int
    every_seconds: int
    options: PlanOptions
    def __init__(self, on_demand: _Optional[_Union[OnDemand, _Mapping]] = ..., every_n_commits: _Optional[int] = ..., every_seconds: _Optional[int] = ..., options: _Optional[_Union[PlanOptions, _Mapping]] = ...) -> None: ...

class SetTriggerPolicyRequest(_message.Message):
    __slots__ = ("table", "policy")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableRef
    policy: TriggerPolicy
    def __init__(self, table: _Optional[_Union[_common_pb2.TableRef, _Mapping]] = ..., policy: _Optional[_Union[TriggerPolicy, _Mapping]] = ...) -> None: ...

class SetTriggerPolicyResponse(_message.Message):
    __slots__ = ("policy",)
    POLICY_FIELD_NUMBER: _ClassVar[int]
    policy: TriggerPolicy
    def __init__(self, policy: _Optional[_Union[TriggerPolicy, _Mapping]] = ...) -> None: ...

class GetTriggerPolicyRequest(_message.Message):
    __slots__ = ("table",)
    TABLE_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableRef
    def __init__(self, table: _Optional[_Union[_common_pb2.TableRef, _Mapping]] = ...) -> None: ...

class GetTriggerPolicyResponse(_message.Message):
    __slots__ = ("policy",)
    POLICY_FIELD_NUMBER: _ClassVar[int]
    policy: TriggerPolicy
    def __init__(self, policy: _Optional[_Union[TriggerPolicy, _Mapping]] = ...) -> None: ...

class RetentionPolicy(_message.Message):
    __slots__ = ("on_demand", "every_n_commits", "every_seconds", "retain_commits", "keep_min_commits", "keep_max_commits")
    ON_DEMAND_FIELD_NUMBER: _ClassVar[int]
    EVERY_N_COMMITS_FIELD_NUMBER: _ClassVar[int]
    EVERY_SECONDS_FIELD_NUMBER: _ClassVar[int]
    RETAIN_COMMITS_FIELD_NUMBER: _ClassVar[int]
    KEEP_MIN_COMMITS_FIELD_NUMBER: _ClassVar[int]
    KEEP_MAX_COMMITS_FIELD_NUMBER: _ClassVar[int]
    on_demand: OnDemand
    every_n_commits: int
    every_seconds: int
    retain_commits: int
    keep_min_commits: int
    keep_max_commits: int
    def __init__(self, on_demand: _Optional[_Union[OnDemand, _Mapping]] = ..., every_n_commits: _Optional[int] = ..., every_seconds: _Optional[int] = ..., retain_commits: _Optional[int] = ..., keep_min_commits: _Optional[int] = ..., keep_max_commits: _Optional[int] = ...) -> None: ...

class SetRetentionPolicyRequest(_message.Message):
    __slots__ = ("table", "policy")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableRef
    policy: RetentionPolicy
    def __init__(self, table: _Optional[_Union[_common_pb2.TableRef, _Mapping]] = ..., policy: _Optional[_Union[RetentionPolicy, _Mapping]] = ...) -> None: ...

class SetRetentionPolicyResponse(_message.Message):
    __slots__ = ("policy",)
    POLICY_FIELD_NUMBER: _ClassVar[int]
    policy: RetentionPolicy
    def __init__(self, policy: _Optional[_Union[RetentionPolicy, _Mapping]] = ...) -> None: ...

class GetRetentionPolicyRequest(_message.Message):
    __slots__ = ("table",)
    TABLE_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableRef
    def __init__(self, table: _Optional[_Union[_common_pb2.TableRef, _Mapping]] = ...) -> None: ...

class GetRetentionPolicyResponse(_message.Message):
    __slots__ = ("policy",)
    POLICY_FIELD_NUMBER: _ClassVar[int]
    policy: RetentionPolicy
    def __init__(self, policy: _Optional[_Union[RetentionPolicy, _Mapping]] = ...) -> None: ...

class RunRetentionRequest(_message.Message):
    __slots__ = ("table",)
    TABLE_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableRef
    def __init__(self, table: _Optional[_Union[_common_pb2.TableRef, _Mapping]] = ...) -> None: ...

class RunRetentionResponse(_message.Message):
    __slots__ = ("clean_instant_times", "files_deleted", "earliest_readable_instant_time", "archived_instants")
    CLEAN_INSTANT_TIMES_FIELD_NUMBER: _ClassVar[int]
    FILES_DELETED_FIELD_NUMBER: _ClassVar[int]
    EARLIEST_READABLE_INSTANT_TIME_FIELD_NUMBER: _ClassVar[int]
    ARCHIVED_INSTANTS_FIELD_NUMBER: _ClassVar[int]
    clean_instant_times: _containers.RepeatedScalarFieldContainer[str]
    files_deleted: int
    earliest_readable_instant_time: str
    archived_instants: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, clean_instant_times: _Optional[_Iterable[str]] = ..., files_deleted: _Optional[int] = ..., earliest_readable_instant_time: _Optional[str] = ..., archived_instants: _Optional[_Iterable[str]] = ...) -> None: ...

class CompactionOptions(_message.Message):
    __slots__ = ("trigger", "max_delta_commits", "max_delta_seconds", "log_file_size_threshold_bytes", "log_file_num_threshold", "partitions", "target_io_mb")
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    MAX_DELTA_COMMITS_FIELD_NUMBER: _ClassVar[int]
    MAX_DELTA_SECONDS_FIELD_NUMBER: _ClassVar[int]
    LOG_FILE_SIZE_THRESHOLD_BYTES_FIELD_NUMBER: _ClassVar[int]
    LOG_FILE_NUM_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    TARGET_IO_MB_FIELD_NUMBER: _ClassVar[int]
    trigger: CompactionTrigger
    max_delta_commits: int
    max_delta_seconds: int
    log_file_size_threshold_bytes: int
    log_file_num_threshold: int
    partitions: PartitionFilter
    target_io_mb: int
    def __init__(self, trigger: _Optional[_Union[CompactionTrigger, str]] = ..., max_delta_commits: _Optional[int] = ..., max_delta_seconds: _Optional[int] = ..., log_file_size_threshold_bytes: _Optional[int] = ..., log_file_num_threshold: _Optional[int] = ..., partitions: _Optional[_Union[PartitionFilter, _Mapping]] = ..., target_io_mb: _Optional[int] = ...) -> None: ...

class CompactionOperation(_message.Message):
    __slots__ = ("partition_path", "file_id", "base_instant_time", "base_file", "log_files", "log_bytes", "io_mb")
    PARTITION_PATH_FIELD_NUMBER: _ClassVar[int]
    FILE_ID_FIELD_NUMBER: _ClassVar[int]
    BASE_INSTANT_TIME_FIELD_NUMBER: _ClassVar[int]
    BASE_FILE_FIELD_NUMBER: _ClassVar[int]
    LOG_FILES_FIELD_NUMBER: _ClassVar[int]
    LOG_BYTES_FIELD_NUMBER: _ClassVar[int]
    IO_MB_FIELD_NUMBER: _ClassVar[int]
    partition_path: str
    file_id: str
    base_instant_time: str
    base_file: str
    log_files: _containers.RepeatedScalarFieldContainer[str]
    log_bytes: int
    io_mb: float
    def __init__(self, partition_path: _Optional[str] = ..., file_id: _Optional[str] = ..., base_instant_time: _Optional[str] = ..., base_file: _Optional[str] = ..., log_files: _Optional[_Iterable[str]] = ..., log_bytes: _Optional[int] = ..., io_mb: _Optional[float] = ...) -> None: ...

class CompactionPlan(_message.Message):
    __slots__ = ("instant_time", "state", "operations", "num_log_files", "log_bytes", "io_mb")
    INSTANT_TIME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    OPERATIONS_FIELD_NUMBER: _ClassVar[int]
    NUM_LOG_FILES_FIELD_NUMBER: _ClassVar[int]
    LOG_BYTES_FIELD_NUMBER: _ClassVar[int]
    IO_MB_FIELD_NUMBER: _ClassVar[int]
    instant_time: str
    state: PlanState
    operations: _containers.RepeatedCompositeFieldContainer[CompactionOperation]
    num_log_files: int
    log_bytes: int
    io_mb: float
    def __init__(self, instant_time: _Optional[str] = ..., state: _Optional[_Union[PlanState, str]] = ..., operations: _Optional[_Iterable[_Union[CompactionOperation, _Mapping]]] = ..., num_log_files: _Optional[int] = ..., log_bytes: _Optional[int] = ..., io_mb: _Optional[float] = ...) -> None: ...

class ScheduleCompactionRequest(_message.Message):
    __slots__ = ("table", "options")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableRef
    options: CompactionOptions
    def __init__(self, table: _Optional[_Union[_common_pb2.TableRef, _Mapping]] = ..., options: _Optional[_Union[CompactionOptions, _Mapping]] = ...) -> None: ...

class ScheduleCompactionResponse(_message.Message):
    __slots__ = ("plan", "reason")
    PLAN_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    plan: CompactionPlan
    reason: str
    def __init__(self, plan: _Optional[_Union[CompactionPlan, _Mapping]] = ..., reason: _Optional[str] = ...) -> None: ...

class ListCompactionsRequest(_message.Message):
    __slots__ = ("table",)
    TABLE_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableRef
    def __init__(self, table: _Optional[_Union[_common_pb2.TableRef, _Mapping]] = ...) -> None: ...

class ListCompactionsResponse(_message.Message):
    __slots__ = ("plans",)
    PLANS_FIELD_NUMBER: _ClassVar[int]
    plans: _containers.RepeatedCompositeFieldContainer[CompactionPlan]
    def __init__(self, plans: _Optional[_Iterable[_Union[CompactionPlan, _Mapping]]] = ...) -> None: ...

class CancelCompactionRequest(_message.Message):
    __slots__ = ("table", "instant_time")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    INSTANT_TIME_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableRef
    instant_time: str
    def __init__(self, table: _Optional[_Union[_common_pb2.TableRef, _Mapping]] = ..., instant_time: _Optional[str] = ...) -> None: ...

class CancelCompactionResponse(_message.Message):
    __slots__ = ("plan",)
    PLAN_FIELD_NUMBER: _ClassVar[int]
    plan: CompactionPlan
    def __init__(self, plan: _Optional[_Union[CompactionPlan, _Mapping]] = ...) -> None: ...

class CompactionPolicy(_message.Message):
    __slots__ = ("on_demand", "automatic")
    ON_DEMAND_FIELD_NUMBER: _ClassVar[int]
    AUTOMATIC_FIELD_NUMBER: _ClassVar[int]
    on_demand: OnDemand
    automatic: CompactionOptions
    def __init__(self, on_demand: _Optional[_Union[OnDemand, _Mapping]] = ..., automatic: _Optional[_Union[CompactionOptions, _Mapping]] = ...) -> None: ...

class SetCompactionPolicyRequest(_message.Message):
    __slots__ = ("table", "policy")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableRef
    policy: CompactionPolicy
    def __init__(self, table: _Optional[_Union[_common_pb2.TableRef, _Mapping]] = ..., policy: _Optional[_Union[CompactionPolicy, _Mapping]] = ...) -> None: ...

class SetCompactionPolicyResponse(_message.Message):
    __slots__ = ("policy",)
    POLICY_FIELD_NUMBER: _ClassVar[int]
    policy: CompactionPolicy
    def __init__(self, policy: _Optional[_Union[CompactionPolicy, _Mapping]] = ...) -> None: ...

class GetCompactionPolicyRequest(_message.Message):
    __slots__ = ("table",)
    TABLE_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableRef
    def __init__(self, table: _Optional[_Union[_common_pb2.TableRef, _Mapping]] = ...) -> None: ...

class GetCompactionPolicyResponse(_message.Message):
    __slots__ = ("policy",)
    POLICY_FIELD_NUMBER: _ClassVar[int]
    policy: CompactionPolicy
    def __init__(self, policy: _Optional[_Union[CompactionPolicy, _Mapping]] = ...) -> None: ...
