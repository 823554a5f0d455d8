"""How Tidemark treats every key of ``hoodie.properties`` (HoodieTableConfig) of Hudi 0.14
and of the keys Hudi 1.0 and 1.1 add.

Each key is honoured, refused (for reads and writes, or for writes only) unless its value
is one Tidemark handles, or ignored because it cannot change what Tidemark reads or
writes. ``docs/hudi-properties.md`` renders this table; a test keeps the two in step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

import structlog

from tidemark.errors import FailedPreconditionError

log = structlog.get_logger(__name__)

Treatment = Literal["honoured", "refused", "ignored"]
Scope = Literal["table", "write"]

PAYLOAD_CLASS_KEY = "hoodie.compaction.payload.class"
OVERWRITE_WITH_LATEST_PAYLOAD = "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"
DEFAULT_RECORD_PAYLOAD = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
"""Event-time ordering: a stored record with a greater ordering value than the incoming
one stays (Hudi 1.x's EVENT_TIME_ORDERING)."""
DEFAULT_MERGER_STRATEGY = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"
"""Hudi's event-time merger (``EVENT_TIME_BASED_MERGE_STRATEGY_UUID``), its default."""
COMMIT_TIME_MERGER_STRATEGY = "ce9acb64-bde0-424c-9b91-f6ebba25356d"
"""Hudi 1.x's commit-time merger (``COMMIT_TIME_BASED_MERGE_STRATEGY_UUID``: the latest
write wins), set with ``COMMIT_TIME_ORDERING``."""
KEYGEN_OPTION_PREFIX = "hoodie.keygen."
TABLE_TYPE_KEY = "hoodie.table.type"
COPY_ON_WRITE = "COPY_ON_WRITE"
MERGE_ON_READ = "MERGE_ON_READ"


@dataclass(frozen=True)
class PropertyRule:
    """``accepts`` says which values Tidemark handles; others are refused (``scope``:
    ``table`` for every read and write, ``write`` for writes only)."""

    key: str
    treatment: Treatment
    why: str
    accepts: Callable[[str], bool] | None = None
    scope: Scope = "table"


def _one_of(*values: str) -> Callable[[str], bool]:
    allowed = {v.upper() for v in values}
    return lambda value: value.strip().upper() in allowed


def _false(value: str) -> bool:
    return value.strip().lower() in ("", "false")


def _empty(value: str) -> bool:
    return not value.strip()


RULES: tuple[PropertyRule, ...] = (
    PropertyRule("hoodie.table.name", "honoured", "names the table (and its checksum)"),
    PropertyRule("hoodie.database.name", "honoured", "part of the checksum"),
    PropertyRule(
        TABLE_TYPE_KEY,
        "refused",
        "copy-on-write or merge-on-read; what does not handle merge-on-read yet refuses it "
        "(check_table_type)",
        _one_of(COPY_ON_WRITE, MERGE_ON_READ),
    ),
    PropertyRule(
        "hoodie.table.version",
        "refused",
        "Tidemark reads, writes and clusters table versions 6, 8 and 9",
        _one_of("6", "8", "9"),
    ),
    PropertyRule(
        "hoodie.timeline.layout.version",
        "refused",
        "timeline layout 1 (table version 6) or 2 (versions 8 and 9), as the version requires",
        _one_of("1", "2"),
    ),
    PropertyRule(
        "hoodie.table.base.file.format",
        "refused",
        "Tidemark reads and writes Parquet base files only",
        _one_of("PARQUET"),
    ),
    PropertyRule(
        "hoodie.table.ro.file.format",
        "refused",
        "old name of hoodie.table.base.file.format: Parquet only",
        _one_of("PARQUET"),
    ),
    PropertyRule(
        "hoodie.bootstrap.base.path",
        "refused",
        "bootstrapped tables keep their data in files outside the table",
        _empty,
    ),
    PropertyRule(
        "hoodie.datasource.write.drop.partition.columns",
        "refused",
        "base files without their partition columns are not supported",
        _false,
    ),
    PropertyRule("hoodie.table.recordkey.fields", "honoured", "record key fields"),
    PropertyRule(
        "hoodie.table.partition.fields",
        "honoured",
        "partition fields (field:SIMPLE or field:TIMESTAMP for the custom key generator)",
    ),
    PropertyRule("hoodie.table.precombine.field", "honoured", "decides between duplicate keys"),
    PropertyRule(
        "hoodie.table.keygenerator.class",
        "honoured",
        "record keys and partition paths; writes and reads by key refuse key generators "
        "Tidemark does not know",
    ),
    PropertyRule(
        "hoodie.populate.meta.fields",
        "honoured",
        "false: virtual keys, derived from the key fields; new rows get null meta columns",
    ),
    PropertyRule("hoodie.datasource.write.hive_style_partitioning", "honoured", "field=value"),
    PropertyRule(
        "hoodie.datasource.write.partitionpath.urlencode",
        "honoured",
        "partition values are URL-encoded in paths",
    ),
    PropertyRule("hoodie.table.create.schema", "honoured", "schema of a table without commits"),
    PropertyRule(
        "hoodie.table.checksum",
        "honoured",
        "kept valid whenever Tidemark rewrites the file; required when reading: a file "
        "without it (truncated) or with a wrong one is refused as damaged (DATA_LOSS naming "
        "the file), as is one giving a key two values",
    ),
    PropertyRule(
        "hoodie.table.metadata.partitions",
        "honoured",
        "versions 8 and 9 with files: every write records its files there and drops the "
        "other partitions; else writes and clustering are refused until a write's "
        "--disable-hudi-metadata-table removes Hudi's metadata table",
    ),
    PropertyRule(
        "hoodie.table.metadata.partitions.inflight",
        "honoured",
        "writes are refused while it names a partition (Hudi is building it)",
    ),
    PropertyRule(
        PAYLOAD_CLASS_KEY,
        "refused",
        "OverwriteWithLatestAvroPayload (the incoming record wins) and "
        "DefaultHoodieRecordPayload (the greater ordering value wins) are how Tidemark "
        "merges; other payloads merge differently",
        _one_of("", OVERWRITE_WITH_LATEST_PAYLOAD, DEFAULT_RECORD_PAYLOAD),
        "write",
    ),
    PropertyRule(
        "hoodie.compaction.record.merger.strategy",
        "refused",
        "only the default (payload-based) merger strategy is supported",
        _one_of("", DEFAULT_MERGER_STRATEGY),
        "write",
    ),
    PropertyRule(
        "hoodie.table.cdc.enabled",
        "refused",
        "Tidemark writes no change-data-capture logs, so CDC readers would miss its writes",
        _false,
        "write",
    ),
    PropertyRule(
        "hoodie.partition.metafile.use.base.format",
        "refused",
        "Tidemark writes partition metadata as a properties file",
        _false,
        "write",
    ),
    PropertyRule(
        "hoodie.table.secondary.indexes.metadata",
        "refused",
        "Tidemark does not maintain Hudi's secondary indexes",
        _empty,
        "write",
    ),
    PropertyRule(
        "hoodie.allow.operation.metadata.field",
        "refused",
        "Tidemark does not write the _hoodie_operation meta column",
        _false,
        "write",
    ),
    PropertyRule(
        "hoodie.table.cdc.supplemental.logging.mode",
        "ignored",
        "only used with hoodie.table.cdc.enabled, which is refused",
    ),
    PropertyRule(
        "hoodie.table.log.file.format",
        "ignored",
        "copy-on-write tables have no log files",
    ),
    PropertyRule(
        "hoodie.table.rt.file.format",
        "ignored",
        "old name of hoodie.table.log.file.format",
    ),
    PropertyRule(
        "hoodie.archivelog.folder",
        "honoured",
        "where Hudi's archived timeline is read: a file older than the active timeline is "
        "committed only if the archive lists its instant as a completed commit",
    ),
    PropertyRule(
        "hoodie.bootstrap.index.enable",
        "ignored",
        "only used with hoodie.bootstrap.base.path, which is refused",
    ),
    PropertyRule(
        "hoodie.bootstrap.index.class",
        "ignored",
        "only used with hoodie.bootstrap.base.path, which is refused",
    ),
    PropertyRule(
        "hoodie.table.timeline.timezone",
        "ignored",
        "Tidemark's instants are UTC and always later than the newest on the timeline, so "
        "the timeline stays ordered whatever zone Hudi used",
    ),
    PropertyRule(
        "hoodie.keygen.timebased.*",
        "honoured",
        "partition paths of timestamp fields (timestamp-based and custom key generators): "
        "timestamp type, input and output date formats, time zones",
    ),
    PropertyRule(
        "hoodie.keygen.datetime.parser.class",
        "ignored",
        "Tidemark parses date strings itself, with the input date format",
    ),
)
HUDI_1X_RULES: tuple[PropertyRule, ...] = (
    PropertyRule(
        "hoodie.timeline.path",
        "refused",
        "where layout 2 keeps the timeline: Tidemark reads the default folder only",
        _one_of("timeline"),
    ),
    PropertyRule(
        "hoodie.timeline.history.path",
        "honoured",
        "where layout 2's LSM history is read (below the timeline folder)",
    ),
    PropertyRule(
        "hoodie.table.initial.version",
        "ignored",
        "the version the table was created at; reads follow hoodie.table.version",
    ),
    PropertyRule(
        "hoodie.table.keygenerator.type",
        "honoured",
        "Hudi 1.x's name of the key generator (SIMPLE, COMPLEX, NON_PARTITION, TIMESTAMP, "
        "CUSTOM), used when hoodie.table.keygenerator.class is absent",
    ),
    PropertyRule(
        "hoodie.table.ordering.fields",
        "honoured",
        "Hudi 1.1's name of the precombine field (the first field decides between duplicate keys)",
    ),
    PropertyRule(
        "hoodie.record.merge.mode",
        "refused",
        "COMMIT_TIME_ORDERING (the incoming record wins) and EVENT_TIME_ORDERING (the "
        "greater ordering value wins) are how Tidemark merges; CUSTOM merges differently",
        _one_of("", "COMMIT_TIME_ORDERING", "EVENT_TIME_ORDERING"),
        "write",
    ),
    PropertyRule(
        "hoodie.record.merge.strategy.id",
        "refused",
        "only Hudi's built-in event-time and commit-time merger strategies are supported "
        "(the merge mode says which)",
        _one_of("", DEFAULT_MERGER_STRATEGY, COMMIT_TIME_MERGER_STRATEGY),
        "write",
    ),
    PropertyRule(
        "hoodie.table.format",
        "refused",
        "Tidemark reads and writes Hudi's own (native) table format",
        _one_of("", "native"),
    ),
    PropertyRule(
        "hoodie.table.index.defs.path",
        "refused",
        "Hudi's index definitions (secondary and expression indexes in the metadata "
        "table), which Tidemark does not maintain; a write that keeps the metadata table's "
        "files partition drops them with their partitions",
        _empty,
        "write",
    ),
    PropertyRule(
        "hoodie.table.complex.keygen.encoding",
        "refused",
        "a complex key of one field is `field:value` (version 9's encoding, the only one "
        "Tidemark writes and derives virtual keys with)",
        _one_of("", "FIELD_PREFIXED"),
    ),
)
"""Keys Hudi 1.0 and 1.1 (table versions 8 and 9) add."""
RULES = RULES + HUDI_1X_RULES
_BY_KEY: dict[str, PropertyRule] = {rule.key: rule for rule in RULES}


def rule_for(key: str) -> PropertyRule | None:
    if key.startswith("hoodie.keygen.timebased."):
        return _BY_KEY["hoodie.keygen.timebased.*"]
    return _BY_KEY.get(key)


def check_table_type(props: Mapping[str, str], *, merge_on_read: bool, what: str) -> None:
    """Refuse a merge-on-read table to ``what`` unless it handles one (``merge_on_read``):
    a copy-on-write change to a merge-on-read table would lose its log files' records."""
    value = props.get(TABLE_TYPE_KEY, "").strip().upper()
    if value == MERGE_ON_READ and not merge_on_read:
        raise FailedPreconditionError(
            f"value {value!r} is not supported by {what} (it handles copy-on-write tables only)",
            field=TABLE_TYPE_KEY,
        )


def check_properties(props: Mapping[str, str], scope: Scope) -> None:
    """Refuse the first key whose value Tidemark cannot honour in ``scope`` (``table``:
    every use of the table; ``write``: also the write-only rules)."""
    for key, value in props.items():
        rule = rule_for(key)
        if rule is None:
            if scope == "table":
                log.warning("table.property_unknown", key=key, value=value)
            continue
        if rule.accepts is None or rule.accepts(value):
            continue
        if rule.scope == "table" or scope == "write":
            raise FailedPreconditionError(
                f"value {value!r} is not supported ({rule.why})", field=key
            )
