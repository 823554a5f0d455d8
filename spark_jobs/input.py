"""Reading a write job's input file(s): Parquet, CSV (RFC 4180, with header) or JSON Lines.

CSV is read as RFC 4180 and Python's ``csv`` module write it: fields quoted with ``"``, a
``"`` inside one doubled, newlines allowed inside quotes; column types are inferred from
all rows. A record Spark cannot parse (a CSV row with more or fewer fields than the
header, a JSON line that is not a JSON object) stops the write with its file and line
number before anything is written: Spark's default would turn it into nulls or drop it.
The checked input is then read with ``mode=FAILFAST``, so it can never be nulled later.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePosixPath

from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, DataFrameReader, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.types import AtomicType, BinaryType, DataType, StringType, StructField, StructType

from spark_jobs.keying import column
from tidemark.errors import InvalidArgumentError, NotFoundError
from tidemark.table.names import INTERNAL_COLUMN_PREFIX

FORMATS = ("parquet", "csv", "json")
_SUFFIXES = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "json"}
_CSV_OPTIONS = {"header": "true", "multiLine": "true", "quote": '"', "escape": '"'}
CORRUPT_RECORD = f"{INTERNAL_COLUMN_PREFIX}corrupt_record"
"""Spark's column for records it could not parse (reserved ``_tm_`` prefix)."""
_SHOWN_CHARS = 80
_MALFORMED = {
    "csv": "fields not as in the header, bad quoting, or a value not of its column's type",
    "json": "not one JSON object, or a value not of its column's type",
}


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


def read_input(
    spark: SparkSession,
    path: str,
    fmt: str | None = None,
    column_types: Mapping[str, DataType] | None = None,
) -> DataFrame:
    """The input as a DataFrame; malformed CSV/JSON records are refused with their line.

    CSV and JSON values of a column named in ``column_types`` (the existing table's
    columns) are read as that type when it is a plain one, not as inferred: a zip code
    column stays a string, a JSON number lands in an ``int`` key as an int.
    """
    kind = input_format(path, fmt)
    if kind == "parquet":
        return _load(spark.read, kind, path)
    options = dict(_CSV_OPTIONS) if kind == "csv" else {}
    options["columnNameOfCorruptRecord"] = CORRUPT_RECORD
    inferred = _load(spark.read.options(**options, inferSchema="true"), kind, path)
    fields = [f for f in inferred.schema.fields if f.name != CORRUPT_RECORD]
    schema = StructType([_typed(f, column_types or {}) for f in fields])
    # JSON inference adds the corrupt-record column only when some line is malformed; CSV
    # inference never does, and a table's type may not fit a value: those are parsed
    # once more with it to find bad records.
    if kind == "csv" or CORRUPT_RECORD in inferred.columns or schema.fields != fields:
        checked = spark.read.schema(_with_corrupt_column(schema)).options(**options)
        _refuse_malformed(spark, _load(checked, kind, path), kind, path)
    return _load(spark.read.schema(schema).options(**options, mode="FAILFAST"), kind, path)


def _load(reader: DataFrameReader, kind: str, path: str) -> DataFrame:
    try:
        return reader.format(kind).load(path)
    except AnalysisException as error:
        raise NotFoundError(f"cannot read {kind} input {path!r}: {error}", field="input") from error
    except Py4JJavaError as error:
        cause = error.java_exception
        while cause.getCause() is not None:
            cause = cause.getCause()
        reason = (str(cause.getMessage() or cause.toString()).splitlines() or ["unknown"])[0]
        raise InvalidArgumentError(
            f"cannot read {path!r} as {kind}: {reason}", field="input"
        ) from error


def _typed(field: StructField, column_types: Mapping[str, DataType]) -> StructField:
    """``field`` as the table's plain type, except binary: Spark's JSON reader would take
    the text as base64; read as a string, it is promoted to its UTF-8 bytes."""
    kind = column_types.get(field.name)
    if (
        isinstance(kind, AtomicType)
        and not isinstance(kind, BinaryType)
        and isinstance(field.dataType, AtomicType)
    ):
        return StructField(field.name, kind, True)
    return field


def _with_corrupt_column(schema: StructType) -> StructType:
    return StructType([*schema.fields, StructField(CORRUPT_RECORD, StringType())])


def _refuse_malformed(spark: SparkSession, checked: DataFrame, kind: str, path: str) -> None:
    """Raise naming the first malformed record, if any (one scan of the input)."""
    data = [name for name in checked.columns if name != CORRUPT_RECORD]
    first_line = None  # when not one record parsed, the first non-blank line is malformed
    if data:
        # Spark refuses queries reading only the corrupt-record column: read one more.
        bad = (
            checked.where(sf.col(CORRUPT_RECORD).isNotNull())
            .select(CORRUPT_RECORD, column(data[0]))
            .limit(1)
            .collect()
        )
        if not bad:
            return
        first_line = (bad[0][CORRUPT_RECORD].splitlines() or [""])[0]
    found = _locate(spark, path, first_line)
    where, text = (f"line {found[1]} of {found[0]}", found[2]) if found else (path, first_line)
    raise InvalidArgumentError(
        f"malformed {kind.upper()} record at {where} ({_MALFORMED[kind]}): "
        f"{(text or '')[:_SHOWN_CHARS]!r}",
        field="input",
    )


def _locate(spark: SparkSession, path: str, first_line: str | None) -> tuple[str, int, str] | None:
    """File, 1-based line number and text of the first line equal to ``first_line`` (of
    the first non-blank line when None). Runs only once a malformed record was found, so
    going through Python workers costs nothing on the normal path."""
    lines = spark.read.text(path).select(sf.input_file_name().alias("file"), "value")
    numbered = lines.rdd.zipWithIndex()
    found = numbered.filter(
        lambda pair: (
            pair[0].value.strip() != "" if first_line is None else pair[0].value == first_line
        )
    ).take(1)
    if not found:
        return None
    row, index = found[0]
    before = numbered.filter(lambda pair: pair[0].file == row.file and pair[1] < index).count()
    return row.file, before + 1, row.value
