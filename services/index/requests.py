"""Validation of index requests: every bad input is an InvalidArgumentError naming its field.

Checks are vectorised over the whole batch, on the Arrow buffers themselves (a 100k-key
batch is checked in about a millisecond) and run before anything is read or staged, so
a rejected request changes nothing. The table path is checked by
``tidemark.rpc.requests.table_uri``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidemark.errors import InvalidArgumentError
from tidemark.index.keys import string_buffers
from tidemark.index.wire import FILE_ID, KEY, PARTITION
from tidemark.rpc import arrow_ipc
from tidemark.table.timeline.instant import validate_instant_time


@dataclass(frozen=True)
class BatchLimits:
    """What one batch may hold: keys (or changes), bytes of one key, decoded bytes."""

    keys: int
    key_bytes: int
    decoded_bytes: int


def keys(payload: bytes, limits: BatchLimits, *, field: str = "keys") -> pa.Array:
    """The keys of an Arrow IPC payload {key: utf8}: at least one, at most
    ``limits.keys``, none null, empty, longer than ``limits.key_bytes`` or holding NUL
    (duplicates are fine)."""
    table = arrow_ipc.decode(payload, field=field, max_bytes=limits.decoded_bytes)
    values = arrow_ipc.column(table, KEY, field=field)
    _check_count(len(values), limits.keys, "keys", field)
    _check_keys(values, limits.key_bytes, field + "[{row}]")
    return values


def changes(payload: bytes, limits: BatchLimits, *, field: str = "changes") -> pa.Table:
    """A commit's changes {key, partition, file_id}: keys as for lookups and each at most
    once, a location (partition may be empty: a non-partitioned table) or neither (delete)."""
    table = arrow_ipc.decode(payload, field=field, max_bytes=limits.decoded_bytes)
    key, partition, file_id = (
        arrow_ipc.column(table, name, field=field) for name in (KEY, PARTITION, FILE_ID)
    )
    _check_count(len(key), limits.keys, "changes", field)
    _check_keys(key, limits.key_bytes, field + "[{row}]." + KEY)
    half = pc.xor(pc.is_null(partition), pc.is_null(file_id))
    _refuse_first(
        half, field + "[{row}]", "partition and file_id must both be set, or both null (a delete)"
    )
    _refuse_first(
        pc.equal(pc.binary_length(file_id), 0), field + "[{row}]." + FILE_ID, "must not be empty"
    )
    if pc.count_distinct(key).as_py() != len(key):
        counts = pc.value_counts(key)
        twice = counts.filter(pc.greater(counts.field("counts"), 1))[0]["values"]
        raise InvalidArgumentError(f"key {twice.as_py()!r} appears more than once", field=field)
    return pa.table({KEY: key, PARTITION: partition, FILE_ID: file_id})


def as_of(value: str) -> str | None:
    """The caller's newest completed instant, if it sent one."""
    return validate_instant_time(value, field="as_of_instant") if value else None


def instant_time(value: str) -> str:
    return validate_instant_time(value, field="instant_time")


def _check_count(count: int, limit: int, what: str, field: str) -> None:
    if count == 0:
        raise InvalidArgumentError(f"must hold at least one of the {what}", field=field)
    if count > limit:
        raise InvalidArgumentError(f"at most {limit} {what} per call, got {count}", field=field)


def _check_keys(values: pa.Array, max_key_bytes: int, field: str) -> None:
    _refuse_first(pc.is_null(values), field, "must not be null")
    offsets, data = string_buffers(values)
    lengths = np.diff(offsets)
    empty = np.flatnonzero(lengths == 0)
    if len(empty):
        raise InvalidArgumentError("must not be empty", field=field.format(row=int(empty[0])))
    long = np.flatnonzero(lengths > max_key_bytes)
    if len(long):
        raise InvalidArgumentError(
            f"is {int(lengths[long[0]])} bytes, over max_key_bytes={max_key_bytes}",
            field=field.format(row=int(long[0])),
        )
    nul = np.flatnonzero(data == 0)
    if len(nul):
        row = int(np.searchsorted(offsets, nul[0], "right")) - 1
        raise InvalidArgumentError(
            "must not hold a NUL character (the index orders keys as NUL-padded bytes)",
            field=field.format(row=row),
        )


def _refuse_first(bad: pa.Array, field: str, message: str) -> None:
    """Raise ``message`` for the first row where ``bad`` is true; ``field`` is a format
    string naming the row (``keys[{row}]``)."""
    if not pc.any(bad).as_py():
        return
    row = int(np.flatnonzero(bad.fill_null(False).to_numpy(zero_copy_only=False))[0])
    raise InvalidArgumentError(message, field=field.format(row=row))
