"""Which Hudi table versions Tidemark opens, and the timeline and archive of each.

Version 6 (Hudi 0.14-0.15) keeps its timeline directly under ``.hoodie/`` (layout 1) and
archives to ``.hoodie/archived`` log files; versions 8 (Hudi 1.0) and 9 (Hudi 1.1, 1.2)
keep it under ``.hoodie/timeline/`` (layout 2) with completion times, and archive to the
LSM history. A version must come with its layout, as hudi-rs also demands. Tidemark
reads, writes and clusters 6, 8 and 9 (docs/hudi-versions.md).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Protocol

from tidemark.errors import FailedPreconditionError
from tidemark.storage.base import Storage
from tidemark.table.timeline.archived import ArchivedTimeline, archive_folder
from tidemark.table.timeline.layout1 import Timeline
from tidemark.table.timeline.layout2 import LayoutTwoTimeline
from tidemark.table.timeline.lsm import LsmTimeline, history_folder

VERSION_KEY = "hoodie.table.version"
LAYOUT_KEY = "hoodie.timeline.layout.version"
READ_VERSIONS = {6: 1, 8: 2, 9: 2}
"""Table version -> the timeline layout it requires."""
DEFAULT_TABLE_VERSION = 6
"""Of new tables: every reader Tidemark names reads 6 (docs/hudi-versions.md)."""


class Archive(Protocol):
    """Instants moved off the active timeline: Hudi 0.x's archived log files or 1.x's
    LSM history, in ``folder``."""

    folder: str

    def completed_writes(self) -> frozenset[str]: ...

    def completed_deltacommits(self) -> dict[str, str]: ...


def table_version(props: Mapping[str, str]) -> int:
    """The table version, checked against its timeline layout (FAILED_PRECONDITION naming
    the key otherwise)."""
    raw = props.get(VERSION_KEY, "").strip()
    version = int(raw) if raw.isdigit() else -1
    if version not in READ_VERSIONS:
        raise FailedPreconditionError(
            f"value {raw!r} is not supported (Tidemark reads table versions 6, 8 and 9)",
            field=VERSION_KEY,
        )
    layout = props.get(LAYOUT_KEY, "").strip()
    if layout != str(READ_VERSIONS[version]):
        raise FailedPreconditionError(
            f"value {layout!r} is not supported (table version {version} requires timeline "
            f"layout {READ_VERSIONS[version]})",
            field=LAYOUT_KEY,
        )
    return version


def add_table_version_argument(parser: argparse.ArgumentParser, *, default: int | None) -> None:
    """``--table-version`` of ``tidemark create`` and of writes that create a table."""
    parser.add_argument(
        "--table-version",
        type=int,
        choices=sorted(READ_VERSIONS),
        default=default,
        help="Hudi table version of a new table: 6 (Hudi 0.14-0.15), 8 (Hudi 1.0) or 9 "
        f"(Hudi 1.1-1.2); default {DEFAULT_TABLE_VERSION} (see docs/hudi-versions.md)",
    )


def open_timeline(storage: Storage, props: Mapping[str, str]) -> Timeline:
    version = table_version(props)
    if READ_VERSIONS[version] == 2:
        return LayoutTwoTimeline(storage, version)
    return Timeline(storage)


def open_archive(storage: Storage, props: Mapping[str, str]) -> Archive:
    if READ_VERSIONS[table_version(props)] == 2:
        return LsmTimeline(storage, history_folder(dict(props)))
    return ArchivedTimeline(storage, archive_folder(dict(props)))


def archived_log(archive: Archive) -> ArchivedTimeline:
    """Version 6's archived timeline (archival appends log files to it)."""
    if not isinstance(archive, ArchivedTimeline):
        raise FailedPreconditionError(
            f"{archive.folder} is an LSM history, not version 6's archived timeline",
            field=VERSION_KEY,
        )
    return archive
