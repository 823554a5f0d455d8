"""A filter's value as a value of its column's type, read as Spark reads that literal.

``expression.bind`` types every filter value by this one function, once; every reader of
filters (row masks, footer and column statistics, the driver's pyarrow prefilter, Spark's
own condition, partition and record-key pruning) takes the bound values. Text is read as Spark's
``CAST(text AS type)`` reads it (ANSI: a value it refuses is an error naming the column,
not an empty result):

- timestamps: ``2026-11-03``, ``2026-11-03 00:00``, ``2026-11-03T00:00:00.123456``, with an
  optional zone (``Z``, ``+01:00``, ``-05``, ``UTC+1``, ``Europe/Paris``); a value without a
  zone (text, a naive ``datetime``, a ``date``) is in the session's time zone
  (``spark.sql.session.timeZone``, passed by the Spark reads; UTC where there is no
  session: the CLI, the table library);
- dates: ``2026-11-03``, ``2026-11``, ``2026``, anything after a space or ``T`` ignored;
- decimals: ``12.34``, ``1e2``, ``.5``, and floats by their shortest text
  (``Decimal(str(x))``: 0.1 is 0.1, not 0.1000000000000000055...); a value with more
  places than the column keeps them, as Spark compares a decimal column with it;
- integers with a sign, floats (``1e3``, ``inf``, ``NaN``, a ``d``/``f`` suffix), booleans
  (``t``, ``yes``, ``1``, ...), all trimmed.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta, timezone, tzinfo
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pyarrow as pa

from tidemark.errors import InvalidArgumentError

NO_SESSION_TIME_ZONE = "UTC"
"""The zone of zone-less timestamps where no Spark session gives one."""

_TIMESTAMP = re.compile(
    r"(?P<year>[+-]?\d{4,})"
    r"(?:-(?P<month>\d{1,2})"
    r"(?:-(?P<day>\d{1,2})"
    r"(?:[T ](?P<hour>\d{1,2})"
    r"(?::(?P<minute>\d{1,2})(?::(?P<second>\d{1,2})(?:\.(?P<fraction>\d*))?)?)?"
    r"(?:\s*(?P<zone>\S.*))?"
    r")?)?)?",
    re.ASCII,
)
"""Spark's timestamp forms, but a time alone (a date from the clock): year, month, day,
a ``T`` or a space, hours, minutes, seconds, a fraction, a zone; each part optional after
the one before, the time needing the whole date."""
_DATE = re.compile(
    r"(?P<year>[+-]?\d{4,})(?:-(?P<month>\d{1,2})(?:-(?P<day>\d{1,2}))?)?(?:[ T].*)?", re.ASCII
)
_OFFSET = re.compile(
    r"(?:UTC|GMT|UT)?"
    r"(?:(?P<sign>[+-])(?P<hours>\d{1,2})(?::?(?P<minutes>\d{2})(?::?(?P<seconds>\d{2}))?)?)?",
    re.ASCII,
)
_INTEGER = re.compile(r"[+-]?\d+", re.ASCII)
_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_FLOAT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[dDfF]?", re.ASCII)
_FLOAT_WORDS = re.compile(r"[+-]?(?:inf|infinity|nan)", re.ASCII | re.IGNORECASE)
_TRUE = frozenset({"t", "true", "y", "yes", "1"})
_FALSE = frozenset({"f", "false", "n", "no", "0"})


def literal(
    value: Any, kind: pa.DataType, column: str, time_zone: str = NO_SESSION_TIME_ZONE
) -> Any:
    """``value`` as a Python value of the Arrow type ``kind`` (None stays None; a value of
    another kind than these is returned as given); an InvalidArgumentError naming
    ``column`` when Spark's cast would refuse it."""
    if value is None or pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return value
    try:
        if pa.types.is_timestamp(kind):
            return _timestamp(value, kind, time_zone)
        if pa.types.is_date(kind):
            return _date(value)
        if pa.types.is_decimal(kind):
            return _decimal(value)
        if isinstance(value, str):
            return _from_text(value.strip(), kind)
    except (ValueError, ArithmeticError, OverflowError, pa.ArrowException) as error:
        raise InvalidArgumentError(f"{value!r} is not a valid {kind}", field=column) from error
    return value


def column_scalar(value: Any, kind: pa.DataType) -> pa.Scalar | None:
    """A typed ``value`` as a scalar of ``kind``, None when ``kind`` cannot hold it exactly
    (12.345 in a decimal(12,2), a microsecond in milliseconds): no stored value equals it,
    and it compares exactly only in its own type, as Spark compares it."""
    try:
        scalar = pa.scalar(value, type=kind)
    except (pa.ArrowException, OverflowError, TypeError):
        return None
    return scalar if scalar.as_py() == value else None


def zone_of(name: str) -> tzinfo:
    """A zone as Spark names one: ``Z``, an offset (``+01:00``, ``-5``, ``UTC+1``,
    ``GMT-03:30``) or a region id (``Europe/Paris``, ``UTC``)."""
    if name == "Z":
        return UTC
    offset = _OFFSET.fullmatch(name) if name else None
    if offset is not None:
        sign = -1 if offset["sign"] == "-" else 1  # UTC, GMT, UT alone: no offset
        hours, minutes, seconds = (int(offset[g] or 0) for g in ("hours", "minutes", "seconds"))
        return timezone(sign * timedelta(hours=hours, minutes=minutes, seconds=seconds))
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as error:
        raise ValueError(f"unknown time zone {name!r}") from error


def _timestamp(value: Any, kind: pa.TimestampType, time_zone: str) -> Any:
    """Aware and in UTC for a column with a zone; naive (its zone ignored, as Spark's
    cast to TIMESTAMP_NTZ) for one without."""
    if isinstance(value, str):
        value = _parse_timestamp(value.strip())
    elif isinstance(value, date) and not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    if not isinstance(value, datetime):
        return value
    if kind.tz is None:
        return value.replace(tzinfo=None)
    if value.tzinfo is None:
        value = value.replace(tzinfo=zone_of(time_zone))
    return value.astimezone(UTC)


def _parse_timestamp(text: str) -> datetime:
    found = _TIMESTAMP.fullmatch(text)
    if found is None:
        raise ValueError("not a timestamp")
    fraction = (found["fraction"] or "").ljust(6, "0")[:6]
    moment = datetime(
        _year(found["year"]),
        int(found["month"] or 1),
        int(found["day"] or 1),
        int(found["hour"] or 0),
        int(found["minute"] or 0),
        int(found["second"] or 0),
        int(fraction),
    )
    return moment.replace(tzinfo=zone_of(found["zone"])) if found["zone"] else moment


def _date(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    found = _DATE.fullmatch(value.strip())
    if found is None:
        raise ValueError("not a date")
    return date(_year(found["year"]), int(found["month"] or 1), int(found["day"] or 1))


def _year(text: str) -> int:
    """Python's dates hold years 1 to 9999 (Spark's a few more)."""
    year = int(text)
    if not 1 <= year <= 9999:
        raise ValueError(f"year {year} is out of range")
    return year


def _decimal(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("a boolean is not a decimal")
    if isinstance(value, str):
        if not _DECIMAL.fullmatch(value.strip()):
            raise ValueError("not a decimal")
        return Decimal(value.strip())
    if isinstance(value, float):
        exact = Decimal(str(value))
        if not exact.is_finite():
            raise ValueError("not a finite number")
        return exact
    if isinstance(value, int):
        return Decimal(value)
    return value


def _from_text(text: str, kind: pa.DataType) -> Any:
    if pa.types.is_integer(kind):
        if not _INTEGER.fullmatch(text):
            raise ValueError("not an integer")
        return pa.scalar(int(text), type=kind).as_py()  # out of the type's range: an error
    if pa.types.is_floating(kind):
        if _FLOAT.fullmatch(text):
            number = float(text.rstrip("dDfF"))
        elif _FLOAT_WORDS.fullmatch(text):
            number = float(text)
        else:
            raise ValueError("not a number")
        return pa.scalar(number, type=kind).as_py()  # float32: rounded as Spark's FLOAT
    if pa.types.is_boolean(kind):
        return _boolean(text)
    return pa.scalar(text).cast(kind).as_py()  # no Spark text form (binary, time): Arrow's


def _boolean(text: str) -> bool:
    lowered = text.lower()
    if lowered in _TRUE or lowered in _FALSE:
        return lowered in _TRUE
    raise ValueError("not a boolean")
