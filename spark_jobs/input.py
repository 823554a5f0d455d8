"""Reading a write job's input file(s): Parquet, CSV (with header) or JSON Lines."""

from __future__ import annotations

from pathlib import PurePosixPath

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession

from tidemark.errors import InvalidArgumentError, NotFoundError

FORMATS = ("parquet", "csv", "json")
_SUFFIXES = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "json"}


def input_format(path: str, explicit: str | None = None) -> str:
    """``explicit``, else from the file extension; a directory without one is Parquet."""
    if explicit is not None:
        if explicit not in FORMATS:
            raise InvalidArgumentError(
                f"unknown input format {explicit!r} (use {', '.join(FORMATS)})", field="format"
            )
        return explicit
    suffix = PurePosixPath(path.rstrip("/")).suffix.lower()
    if suffix and suffix not in _SUFFIXES:
        raise InvalidArgumentError(
            f"cannot tell the format of {path!r}; pass --format {'|'.join(FORMATS)}", field="input"
        )
    return _SUFFIXES.get(suffix, "parquet")


def read_input(spark: SparkSession, path: str, fmt: str | None = None) -> DataFrame:
    kind = input_format(path, fmt)
    reader = spark.read
    if kind == "csv":
        reader = reader.option("header", "true").option("inferSchema", "true")
    try:
        return reader.format(kind).load(path)
    except AnalysisException as error:
        raise NotFoundError(f"cannot read {kind} input {path!r}: {error}", field="input") from error
