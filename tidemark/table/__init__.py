"""Hudi tables (versions 6, 8 and 9; copy-on-write, and merge-on-read for reads):
``HoodieTable``, the opened table that ties a table's storage, configuration, timeline and
file-system view, and the packages below, by concept and from the bottom up:

- ``metadata``: what each action records, in Hudi's encodings (JSON and Avro);
- ``timeline``: instants, the active timelines (layouts 1 and 2), the archived timeline;
- ``properties``: ``hoodie.properties`` and how each key is treated;
- ``records``: keys, schemas, Avro names, ordering;
- ``logfiles``: merge-on-read log files: names, block framing, data, delete and command blocks;
- ``filters``: filters bound once to a schema, as pyarrow expressions, statistics, partition
  and record-key pruning;
- ``metadata_table``: Hudi's metadata table (its ``files`` partition) as Tidemark keeps it,
  and the table's files listed through it;
- ``files``: file names, the file-system view and file slices, base-file reads and slice
  merges, column statistics;
- ``leases`` and ``plans``: leases on the table's storage; clustering and compaction plans;
- ``writes``: checks, markers, commit and rollback;
- ``maintenance``: cleaning, orphans, archival, upgrade.

Each package imports only those listed before it (import-linter keeps it so); the layers
above ``tidemark.table`` open a table here once and hand the ``HoodieTable`` down."""

from __future__ import annotations

import structlog

from tidemark.errors import AlreadyExistsError, InvalidArgumentError, NotFoundError
from tidemark.storage import open_storage
from tidemark.storage.base import Storage
from tidemark.table.files.file_names import PARTITION_METADATA_FILE, join_path
from tidemark.table.files.view import FileSystemView
from tidemark.table.metadata_table.listing import MetadataListing
from tidemark.table.metadata_table.partitions import keeps_files
from tidemark.table.properties.config import (
    PROPERTIES_PATH,
    TableConfig,
    format_properties,
    load_table_config,
    write_table_config,
)
from tidemark.table.timeline.instant import validate_instant_time
from tidemark.table.timeline.versions import open_archive, open_timeline

__all__ = ["HoodieTable", "not_a_table"]

log = structlog.get_logger(__name__)


class HoodieTable:
    """An opened copy-on-write table (version 6, 8 or 9). Build with ``create`` or
    ``open``."""

    def __init__(self, storage: Storage, config: TableConfig) -> None:
        self.storage = storage
        self.config = config
        props = dict(config.properties) or config.to_properties()
        self.timeline = open_timeline(storage, props)
        self.archive = open_archive(storage, props)

    @property
    def uri(self) -> str:
        return self.storage.uri

    @classmethod
    def create(cls, uri: str, config: TableConfig) -> HoodieTable:
        """Write ``hoodie.properties``; AlreadyExistsError if the table exists."""
        storage = _open_table_storage(uri)
        if not write_table_config(storage, config):
            raise AlreadyExistsError(f"a Hudi table already exists at {uri}", field="table")
        log.info("table.created", table=uri, name=config.name)
        return cls(storage, config)

    @classmethod
    def open(cls, uri: str) -> HoodieTable:
        """NotFoundError(field="table") when there is no table at ``uri``."""
        return cls.from_storage(_open_table_storage(uri))

    @classmethod
    def from_storage(cls, storage: Storage) -> HoodieTable:
        """Only a missing ``hoodie.properties`` means "not a Hudi table"; a missing bucket
        or a storage failure is reported as itself."""
        try:
            config = load_table_config(storage)
        except NotFoundError as missing:
            if missing.field != "path":
                raise
            raise not_a_table(storage.uri) from missing
        return cls(storage, config)

    def current_avro_schema(self) -> str:
        """The schema of the latest completed write (evolution changes it), else the
        table's creation schema."""
        last = self.timeline.last_completed()
        if last is not None:
            schema = self.timeline.read_metadata(last).extra_metadata.get("schema")
            if schema:
                return schema
        return self.config.avro_schema

    def view(self, as_of: str | None = None) -> FileSystemView:
        """The table's files as of ``as_of``; listed through Hudi's metadata table where
        Tidemark keeps its ``files`` partition (table versions 8 and 9), else by listing
        storage."""
        return FileSystemView(
            self.storage, self.timeline, as_of, self.archive, listing=self.metadata_listing()
        )

    def metadata_listing(self) -> MetadataListing | None:
        """The listing through the metadata table's ``files`` partition, or None where
        Tidemark does not keep one."""
        if not keeps_files(dict(self.config.properties), self.config.table_version):
            return None
        instants = self.timeline.instants()
        start = instants[0].timestamp if instants else None

        def visible(instant: str) -> bool:
            return self.timeline.is_completed(instant) or start is None or instant < start

        return MetadataListing(self.storage, visible)

    def write_partition_metadata(self, partition_path: str, instant: str) -> bool:
        """``.hoodie_partition_metadata`` (Hudi's partition discovery needs it); kept if present."""
        validate_instant_time(instant)
        depth = len(partition_path.split("/")) if partition_path else 0
        content = format_properties(
            {"commitTime": instant, "partitionDepth": str(depth)}, comment="partition metadata"
        )
        path = join_path(partition_path, PARTITION_METADATA_FILE)
        return self.storage.create_if_absent(path, content)


def _open_table_storage(uri: str) -> Storage:
    """The storage at ``uri`` (its ``uri`` canonical: the one spelling every layer below
    uses); table paths inside ``.hoodie`` are refused before any request is made."""
    storage = open_storage(uri)
    if ".hoodie" in storage.uri.split("/"):
        raise InvalidArgumentError(f"table path {uri} is inside a .hoodie folder", field="table")
    return storage


def not_a_table(uri: str) -> NotFoundError:
    """The one error for a path without ``hoodie.properties``."""
    return NotFoundError(f"not a Hudi table (no {PROPERTIES_PATH}): {uri}", field="table")
