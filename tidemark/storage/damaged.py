"""Stored files that do not parse: one error for every reader, naming the file.

A file on storage that a reader cannot decode (invalid JSON, Avro or UTF-8, a torn last
line, a failed checksum) was damaged outside Tidemark: writes are whole-object puts or
renames, never partial. Nothing read from it is trusted, so the reader raises
``DataLossError`` (gRPC DATA_LOSS) naming the file and, where there is one, the way out,
and the caller stops before it changes anything.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TypeVar

from fastavro.read import SchemaResolutionError

from tidemark.errors import DataLossError, InvalidArgumentError, TidemarkError
from tidemark.storage.base import Storage

T = TypeVar("T")

PARSE_ERRORS: tuple[type[Exception], ...] = (
    ValueError,  # also UnicodeDecodeError and json.JSONDecodeError
    KeyError,
    TypeError,
    IndexError,
    EOFError,
    struct.error,
    SchemaResolutionError,
    InvalidArgumentError,  # a parser's refusal of what it was given
)
"""What decoding damaged bytes raises (a parser's own bugs raise other errors)."""


def damaged(uri: str, problem: str, way_out: str | None = None) -> DataLossError:
    """The error of a damaged file: ``<uri> is damaged: <problem> (<way out>)``."""
    return DataLossError(f"{uri} is damaged: {problem}" + (f" ({way_out})" if way_out else ""))


def describe(error: Exception) -> str:
    """A one-line account of a parse failure."""
    if isinstance(error, TidemarkError):
        return error.message
    return f"{type(error).__name__}: {error}".splitlines()[0]


def read_parsed(
    storage: Storage, path: str, parse: Callable[[bytes], T], way_out: str | None = None
) -> T:
    """Read ``path`` and parse it; NotFoundError when it is missing, DataLossError naming
    it when it does not parse."""
    data = storage.read(path)
    try:
        return parse(data)
    except PARSE_ERRORS as error:
        raise damaged(f"{storage.uri}/{path}", describe(error), way_out) from error
