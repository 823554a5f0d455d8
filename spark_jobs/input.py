"""Reading a write job's input file(s): Parquet, CSV (RFC 4180, with header) or JSON Lines.

CSV is read as RFC 4180 and Python's ``csv`` module write it: fields quoted with ``"``, a
``"`` inside one doubled, newlines allowed inside quotes; column types are inferred from
all rows. A record Spark cannot parse (a CSV row with more or fewer fields than the
header, a JSON line that is not one JSON object) stops the write with its file and line
number before anything is written: Spark's default would turn it into nulls, drop it, or
(for a line holding two objects, or an array of them) keep only some of them. The checked
input is then read with ``mode=FAILFAST``, so it can never be nulled later.

Inference never changes the text of a record key or partition value: such a CSV column
whose inferred type would write some value back as other text (``007`` as the int 7,
``TRUE`` as ``true``, ``1e3`` as ``1000.0``) is read as strings. A CSV header that Spark
would rename (a name repeated, or empty) is refused.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import PurePosixPath

from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, DataFrameReader, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.types import AtomicType, BinaryType, DataType, StringType, StructField, StructType

from tidemark.errors import InvalidArgumentError, NotFoundError
from tidemark.jobs.checks import require_one_of
from tidemark.jobs.keying import column
from tidemark.table.records.avro_names import INTERNAL_COLUMN_PREFIX

FORMATS = ("parquet", "csv", "json")
_SUFFIXES = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "json"}
_CSV_OPTIONS = {"header": "true", "multiLine": "true", "quote": '"', "escape": '"'}
CORRUPT_RECORD = f"{INTERNAL_COLUMN_PREFIX}corrupt_record"
"""Spark's column for records it could not parse (reserved ``_tm_`` prefix)."""
_SHOWN_CHARS = 80
_JSON_CHECK_TAIL = ",0]"
"""A line ``L`` parsed as the JSON array ``[L,0]`` has exactly two items if and only if
``L`` is one JSON value: Spark's reader ignores whatever follows a line's first value."""
_MALFORMED = {
    "csv": "fields not as in the header, bad quoting, or a value not of its column's type",
    "json": "not one JSON object, a field named twice, or a value not of its column's type",
}


def input_format(path: str, explicit: str | None = None) -> str:
    """``explicit``, else from the file extension; a directory without one is Parquet."""
    if explicit is not None:
        require_one_of("format", explicit, FORMATS, "input format")
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
    exact_columns: Collection[str] = (),
) -> DataFrame:
    """The input as a DataFrame; malformed CSV/JSON records are refused with their line.

    CSV and JSON values of a column named in ``column_types`` (the existing table's
    columns) are read as that type when it is a plain one, not as inferred: a zip code
    column stays a string, a JSON number lands in an ``int`` key as an int. The inferred
    type of a CSV column in ``exact_columns`` (record key and partition fields) must write
    every value back as the same text, else the column is read as strings.
    """
    kind = input_format(path, fmt)
    if kind == "parquet":
        return _load(spark.read, kind, path)
    options = dict(_CSV_OPTIONS) if kind == "csv" else {}
    options["columnNameOfCorruptRecord"] = CORRUPT_RECORD
    if kind == "csv":
        _check_csv_header(spark, path, options)
    else:
        _refuse_json_lines_not_one_object(spark, path)
    inferred = _load(spark.read.options(**options, inferSchema="true"), kind, path)
    fields = [f for f in inferred.schema.fields if f.name != CORRUPT_RECORD]
    if kind == "csv":
        fields = _text_kept(
            spark, path, options, fields, set(exact_columns) - set(column_types or {})
        )
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


def _check_csv_header(spark: SparkSession, path: str, options: Mapping[str, str]) -> None:
    """Refuse a header Spark would silently rename: a repeated name (``v`` twice becomes
    ``v1``, ``v2``; names differing only in case count as the same, as Spark resolves
    them) or an empty one (becomes ``_c1``)."""
    header = _load(spark.read.options(**{**options, "header": "false"}), "csv", path).first()
    if header is None:
        return
    seen: dict[str, int] = {}
    for position, name in enumerate(header, start=1):
        if name is None or name == "":
            raise InvalidArgumentError(
                f"the CSV header of {path!r} has no name for column {position} (Spark would "
                f"call it _c{position - 1}); name every column",
                field="input",
            )
        if name.lower() in seen:
            raise InvalidArgumentError(
                f"the CSV header of {path!r} names columns {seen[name.lower()]} and {position} "
                f"alike (Spark would rename them); column names must be distinct",
                field=name,
            )
        seen[name.lower()] = position


def _refuse_json_lines_not_one_object(spark: SparkSession, path: str) -> None:
    """Refuse the first non-blank line that is not exactly one JSON object, with its line
    number: two objects on a line, an object followed by other text, an array (Spark
    would keep the first object, or make a row of each element), or an object naming a
    field twice (also in another case: Spark would keep one value). One JVM scan."""
    lines = _load(spark.read, "text", path)
    value = sf.col("value")
    items = sf.from_json(sf.concat(sf.lit("["), value, sf.lit(_JSON_CHECK_TAIL)), "array<string>")
    names = sf.transform(sf.json_object_keys(value), sf.lower)
    repeated = sf.coalesce(sf.size(names) != sf.size(sf.array_distinct(names)), sf.lit(False))
    bad = ~value.rlike(r"^\s*$") & (
        ~value.rlike(r"^\s*\{") | (sf.coalesce(sf.size(items), sf.lit(-1)) != 2) | repeated
    )
    found = lines.where(bad).limit(1).collect()
    if found:
        _raise_malformed(spark, "json", path, found[0]["value"])


def _text_kept(
    spark: SparkSession,
    path: str,
    options: Mapping[str, str],
    fields: list[StructField],
    exact: Collection[str],
) -> list[StructField]:
    """``fields`` with the columns of ``exact`` whose inferred type would change the text
    of some value (``007`` read as 7) made strings. One scan of the input as text."""
    typed = [f for f in fields if f.name in exact and not isinstance(f.dataType, StringType)]
    if not typed:
        return fields
    text = _load(spark.read.options(**options), "csv", path)
    changed = [
        sf.count_if(
            column(f.name).isNotNull()
            & ~column(f.name).eqNullSafe(column(f.name).try_cast(f.dataType).cast("string"))
        ).alias(f.name)
        for f in typed
    ]
    counts = text.agg(*changed).collect()[0]
    as_text = {f.name for f in typed if counts[f.name]}
    return [StructField(f.name, StringType(), True) if f.name in as_text else f for f in fields]


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
    _raise_malformed(spark, kind, path, first_line)


def _raise_malformed(spark: SparkSession, kind: str, path: str, first_line: str | None) -> None:
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
