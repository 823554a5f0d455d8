"""What every write task needs to know, shipped to executors as one picklable value."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from tidemark.table.logfiles.data_blocks import DEFAULT_LOG_BLOCK_FORMAT
from tidemark.table.properties.config import TableConfig
from tidemark.table.writes.markers import MarkerSpec


@dataclass(frozen=True)
class WriteContext:
    """The instant (and its action) being written and where; ``file_schema`` is every base
    file's schema; ``log_block_format`` the data blocks of a merge-on-read table's logs."""

    table_uri: str
    instant: str
    action: str
    markers: MarkerSpec
    file_schema: pa.Schema
    config: TableConfig
    log_block_format: str = DEFAULT_LOG_BLOCK_FORMAT
