"""Base file names: ``<fileId>_<writeToken>_<instantTime>.parquet`` as Hudi names them."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from tidemark.checks import require_non_negative
from tidemark.errors import InvalidArgumentError
from tidemark.table.timeline.instant import validate_instant_time

BASE_FILE_EXTENSION = ".parquet"
PARTITION_METADATA_FILE = ".hoodie_partition_metadata"
_BASE_FILE_NAME = re.compile(
    r"(?P<file_id>[^_/]+)_(?P<write_token>\d+-\d+-\d+)_(?P<instant>\d{17})\.parquet"
)


@dataclass(frozen=True)
class BaseFileName:
    file_id: str
    write_token: str
    instant: str


def new_file_id() -> str:
    """A new file group id: a random UUID plus Hudi's ``-0`` file index suffix."""
    return f"{uuid.uuid4()}-0"


def write_token(task_partition_id: int, stage_id: int, task_attempt_id: int) -> str:
    """Distinguishes task attempts writing the same file group in one instant."""
    for name, value in (
        ("task_partition_id", task_partition_id),
        ("stage_id", stage_id),
        ("task_attempt_id", task_attempt_id),
    ):
        require_non_negative(name, value)
    return f"{task_partition_id}-{stage_id}-{task_attempt_id}"


def base_file_name(file_id: str, token: str, instant: str) -> str:
    if not file_id or "_" in file_id or "/" in file_id:
        raise InvalidArgumentError(f"{file_id!r} is not a file id", field="file_id")
    validate_instant_time(instant)
    return f"{file_id}_{token}_{instant}{BASE_FILE_EXTENSION}"


def parse_base_file_name(name: str) -> BaseFileName:
    match = _BASE_FILE_NAME.fullmatch(name)
    if match is None:
        raise InvalidArgumentError(f"{name!r} is not a Hudi base file name", field="file_name")
    return BaseFileName(match.group("file_id"), match.group("write_token"), match.group("instant"))


def is_base_file_name(name: str) -> bool:
    return _BASE_FILE_NAME.fullmatch(name) is not None


def partition_of(path: str) -> str:
    """The partition path of a table-relative file path (``""`` at the table root)."""
    return path.rpartition("/")[0]


def join_path(partition_path: str, file_name: str) -> str:
    return f"{partition_path}/{file_name}" if partition_path else file_name
