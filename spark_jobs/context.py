"""What every write task needs to know, shipped to executors as one picklable value."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from tidemark.table.properties.config import TableConfig
from tidemark.table.writes.markers import MarkerSpec


@dataclass(frozen=True)
class WriteContext:
    """The instant (and its action) being written and where; ``file_schema`` is every base
    file's schema."""

    table_uri: str
    instant: str
    action: str
    markers: MarkerSpec
    file_schema: pa.Schema
    config: TableConfig
