"""Partition paths of Hudi's timestamp-based key generator (also the TIMESTAMP fields of the
custom one): a time value, parsed by its type, formatted with a Java date pattern.

Options are the ``hoodie.keygen.timebased.*`` keys Hudi stores in hoodie.properties.
Hudi 0.14 does not store ``timestamp.type``: a string field with an input date format is
``DATE_STRING`` (the only type a string can have besides MIXED); a numeric field without
a stored type is refused, since seconds and milliseconds cannot be told apart. A null
value is Hudi's default, 1 ms after the epoch. Patterns accept the letters Hudi's
partition layouts use (``y M d H m s S`` and zone ``Z``/``X``) and quoted literals.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, tzinfo

import pyarrow as pa
import pyarrow.compute as pc

from tidemark.errors import FailedPreconditionError, InvalidArgumentError

PREFIX = "hoodie.keygen.timebased."
TIMESTAMP_TYPE = PREFIX + "timestamp.type"
INPUT_FORMAT = PREFIX + "input.dateformat"
OUTPUT_FORMAT = PREFIX + "output.dateformat"
TIMEZONE = PREFIX + "timezone"
OUTPUT_TIMEZONE = PREFIX + "output.timezone"
SCALAR_UNIT = PREFIX + "timestamp.scalar.time.unit"
_MS_PER_UNIT = {"UNIX_TIMESTAMP": 1000, "EPOCHMILLISECONDS": 1}
_SCALAR_MS = {"MILLISECONDS": 1, "SECONDS": 1000, "MINUTES": 60_000, "HOURS": 3_600_000}
_SCALAR_MS["DAYS"] = 24 * _SCALAR_MS["HOURS"]
_LETTERS = {"yyyy": "%Y", "yy": "%y", "MM": "%m", "dd": "%d", "HH": "%H", "mm": "%M", "ss": "%S"}
_PARSE_ONLY = {"SSS": "%f", "Z": "%z", "X": "%z", "XX": "%z", "XXX": "%z"}
_DEFAULT_EPOCH_MS = 1


def timestamp_partition_values(values: pa.Array, props: Mapping[str, str], field: str) -> pa.Array:
    """The formatted partition value of every row of ``values`` (the field's column)."""
    output = java_pattern(props.get(OUTPUT_FORMAT, ""), OUTPUT_FORMAT, parsing=False)
    zone = props.get(OUTPUT_TIMEZONE) or props.get(TIMEZONE) or "UTC"
    epoch_ms = pc.fill_null(_epoch_ms(values, props, field), _DEFAULT_EPOCH_MS)
    instants = pc.cast(epoch_ms, pa.timestamp("ms", tz="UTC"))
    seconds = pc.cast(instants, pa.timestamp("s", tz="UTC"), safe=False)
    try:
        return pc.strftime(seconds.cast(pa.timestamp("s", tz=_arrow_zone(zone))), format=output)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        raise FailedPreconditionError(
            f"value {zone!r} is not a time zone Tidemark knows", field=OUTPUT_TIMEZONE
        ) from error


def _epoch_ms(values: pa.Array, props: Mapping[str, str], field: str) -> pa.Array:
    kind = props.get(TIMESTAMP_TYPE, "").strip().upper()
    is_string = pa.types.is_string(values.type) or pa.types.is_large_string(values.type)
    if not kind and is_string and props.get(INPUT_FORMAT):
        kind = "DATE_STRING"
    if kind == "DATE_STRING" and is_string:
        return _parse_strings(values, props, field)
    if kind in _MS_PER_UNIT and pa.types.is_integer(values.type):
        return pc.multiply(values.cast(pa.int64()), _MS_PER_UNIT[kind])
    if kind == "SCALAR" and pa.types.is_integer(values.type):
        unit = props.get(SCALAR_UNIT, "SECONDS").strip().upper()
        if unit not in _SCALAR_MS:
            raise FailedPreconditionError(f"value {unit!r} is not supported", field=SCALAR_UNIT)
        return pc.multiply(values.cast(pa.int64()), _SCALAR_MS[unit])
    raise FailedPreconditionError(
        f"value {kind or '(unset)'!r} is not supported for {field} of type {values.type} "
        "(use DATE_STRING for strings; UNIX_TIMESTAMP, EPOCHMILLISECONDS or SCALAR for "
        "integers)",
        field=TIMESTAMP_TYPE,
    )


def _parse_strings(values: pa.Array, props: Mapping[str, str], field: str) -> pa.Array:
    """Parse the distinct strings once each (Python's strptime: Arrow's lacks %f)."""
    pattern = java_pattern(props.get(INPUT_FORMAT, ""), INPUT_FORMAT, parsing=True)
    zone = props.get(PREFIX + "input.timezone") or props.get(TIMEZONE) or "UTC"
    unique = pc.unique(values)
    parsed: list[int | None] = []
    for text in unique.to_pylist():
        if text is None:
            parsed.append(None)
            continue
        try:
            moment = datetime.strptime(text, pattern)
        except ValueError as error:
            raise InvalidArgumentError(
                f"{text!r} does not match {INPUT_FORMAT}={props.get(INPUT_FORMAT)}", field=field
            ) from error
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=_python_zone(zone))
        parsed.append(int(moment.timestamp() * 1000))
    return pc.take(pa.array(parsed, pa.int64()), pc.index_in(values, value_set=unique))


def java_pattern(pattern: str, key: str, *, parsing: bool) -> str:
    """A Java date pattern as a strftime/strptime format."""
    if not pattern:
        raise FailedPreconditionError(
            "must be set for the timestamp-based key generator", field=key
        )
    out: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "'":
            end = pattern.find("'", index + 1)
            if end < 0:
                raise FailedPreconditionError(f"value {pattern!r} has an unclosed quote", field=key)
            out.append("'" if end == index + 1 else pattern[index + 1 : end].replace("%", "%%"))
            index = end + 1
            continue
        run = index
        while run < len(pattern) and pattern[run] == char:
            run += 1
        token = pattern[index:run]
        if not char.isalpha():
            out.append(token.replace("%", "%%"))
        elif token in _LETTERS or (parsing and token in _PARSE_ONLY):
            out.append(_LETTERS.get(token) or _PARSE_ONLY[token])
        else:
            raise FailedPreconditionError(
                f"value {pattern!r}: {token!r} is not supported "
                f"(use {' '.join(_LETTERS)}{', SSS Z X' if parsing else ''} and quoted text)",
                field=key,
            )
        index = run
    return "".join(out)


def _arrow_zone(zone: str) -> str:
    return "UTC" if zone.upper() in ("UTC", "GMT", "Z") else zone


def _python_zone(zone: str) -> tzinfo:
    if zone.upper() in ("UTC", "GMT", "Z"):
        return UTC
    raise FailedPreconditionError(
        f"value {zone!r} is not supported for string input (use UTC)", field=TIMEZONE
    )
