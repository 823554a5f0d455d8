"""The options of a snapshot read (``ReadOptions``) and of a key lookup (``LookupOptions``)
as frozen values, checked when made, with ``tidemark read``'s defaults:
``tidemark.spark.read`` and ``tidemark.spark.lookup`` take them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tidemark.errors import InvalidArgumentError
from tidemark.jobs.read import READ_READERS
from tidemark.table.files.query_types import SNAPSHOT, check_query_type
from tidemark.table.files.reader import Filter


@dataclass(frozen=True)
class LookupOptions:
    """What a key lookup returns and how it reads."""

    columns: Sequence[str] | None = None
    """Columns to return (None: all, meta columns first; ``--columns``)."""
    as_of: str | None = None
    """The snapshot at this instant (None: the latest; ``--as-of``)."""
    reader: str = "auto"
    """One of ``tidemark.jobs.read.READ_READERS``: ``auto`` reads in the driver when that
    pays, else Spark scans."""
    query_type: str = SNAPSHOT
    """``snapshot`` (base files merged with their logs) or ``read_optimized`` (latest base
    files only, logs ignored: ``tidemark.table.files.query_types``; ``--query-type``)."""

    def __post_init__(self) -> None:
        if self.columns is not None:
            object.__setattr__(self, "columns", tuple(self.columns))
        check_query_type(self.query_type)
        if self.reader not in READ_READERS:
            raise InvalidArgumentError(f"use one of {', '.join(READ_READERS)}", field="reader")


@dataclass(frozen=True)
class ReadOptions(LookupOptions):
    """What a snapshot read returns and how it reads: a lookup's options and the rows'
    conditions."""

    filters: Sequence[Filter] = ()
    """``(column, op, value)`` conditions; they prune partitions and files, then rows."""
    where: Mapping[str, Any] | None = None
    """``{column: value or list}``: ``=`` or ``in`` conditions (``--where``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "filters", tuple(self.filters))


DEFAULT_READ = ReadOptions()
DEFAULT_LOOKUP = LookupOptions()
