"""Log file names: ``.<fileId>_<instant>.log.<version>_<writeToken>`` as Hudi names them.

Which instant names a log file depends on the table version. On version 6 it is the base
instant of the file slice the log belongs to (the block headers carry the deltacommit's own
instant), and every append to the slice writes the next version. On versions 8 and 9 it is
the requested time of the deltacommit that writes the file, so each deltacommit starts at
version 1 with its own files. A new version is written with the writer's own write token;
Hudi's rollback of a version-6 append writes its command block with the unknown write token
``1-0-1``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from tidemark.errors import InvalidArgumentError

__all__ = [
    "FIRST_VERSION",
    "ROLLBACK_WRITE_TOKEN",
    "LogFileName",
    "is_log_file_name",
    "log_file_instant",
    "log_file_name",
    "names_slice_by_base_instant",
    "next_log_file_name",
    "parse_log_file_name",
]

FIRST_VERSION = 1
ROLLBACK_WRITE_TOKEN = "1-0-1"
"""Hudi's unknown write token, which its version-6 rollback gives the command block's file."""
_WRITE_TOKEN = re.compile(r"\d+-\d+-\d+")
_INSTANT = re.compile(r"\d{17}")
"""17 digits; not always a time: Hudi's metadata table names its initial logs 000...0 to 4."""
_LOG_FILE_NAME = re.compile(
    rf"\.(?P<file_id>[^_/]+)_(?P<instant>{_INSTANT.pattern})\.log\.(?P<version>[1-9]\d*)"
    rf"_(?P<write_token>{_WRITE_TOKEN.pattern})"
)
_PER_SLICE_VERSIONS = 6
"""The last table version naming log files by their slice's base instant."""


@dataclass(frozen=True)
class LogFileName:
    file_id: str
    instant: str
    version: int
    write_token: str

    @property
    def name(self) -> str:
        return f".{self.file_id}_{self.instant}.log.{self.version}_{self.write_token}"

    @property
    def order_key(self) -> tuple[str, int, str]:
        """Hudi's order of a slice's log files by name (version 6): instant, then version,
        then token. Versions 8 and 9 order by the writing deltacommit's completion first."""
        return (self.instant, self.version, self.write_token)


def log_file_name(file_id: str, instant: str, version: int, write_token: str) -> LogFileName:
    """The checked parts of a log file name; InvalidArgumentError naming the bad part."""
    if not file_id or "_" in file_id or "/" in file_id:
        raise InvalidArgumentError(f"{file_id!r} is not a file id", field="file_id")
    if _INSTANT.fullmatch(instant) is None:
        raise InvalidArgumentError(f"{instant!r} is not an instant", field="instant")
    if version < FIRST_VERSION:
        raise InvalidArgumentError(f"must be >= {FIRST_VERSION}, got {version}", field="version")
    if _WRITE_TOKEN.fullmatch(write_token) is None:
        raise InvalidArgumentError(f"{write_token!r} is not a write token", field="write_token")
    return LogFileName(file_id, instant, version, write_token)


def parse_log_file_name(name: str) -> LogFileName:
    match = _LOG_FILE_NAME.fullmatch(name)
    if match is None:
        raise InvalidArgumentError(f"{name!r} is not a Hudi log file name", field="file_name")
    return LogFileName(
        match.group("file_id"),
        match.group("instant"),
        int(match.group("version")),
        match.group("write_token"),
    )


def is_log_file_name(name: str) -> bool:
    return _LOG_FILE_NAME.fullmatch(name) is not None


def names_slice_by_base_instant(table_version: int) -> bool:
    """Whether log files of ``table_version`` carry their slice's base instant (and count
    versions up within the slice) rather than their deltacommit's instant."""
    return table_version <= _PER_SLICE_VERSIONS


def log_file_instant(table_version: int, base_instant: str | None, requested: str) -> str:
    """The instant a deltacommit requested at ``requested`` names its log files with: on
    version 6 the base instant of the slice it appends to (its own instant for a slice
    without a base file), on versions 8 and 9 its own requested time."""
    if names_slice_by_base_instant(table_version) and base_instant is not None:
        return base_instant
    return requested


def next_log_file_name(
    existing: Iterable[str], file_id: str, instant: str, write_token: str
) -> LogFileName:
    """The log file to write next for ``file_id`` under ``instant``: the version after the
    highest one already there (log files are never appended to in place), or the first."""
    versions = [
        parsed.version
        for parsed in map(_parsed_or_none, existing)
        if parsed is not None and parsed.file_id == file_id and parsed.instant == instant
    ]
    return log_file_name(file_id, instant, max(versions, default=0) + 1, write_token)


def _parsed_or_none(name: str) -> LogFileName | None:
    name = name.rpartition("/")[2]
    return parse_log_file_name(name) if is_log_file_name(name) else None
