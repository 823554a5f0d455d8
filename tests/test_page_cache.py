"""The benchmarks' cold reads: a file's pages dropped from the OS page cache, as mincore sees."""

from __future__ import annotations

import os
from pathlib import Path

from tidemark.commands.page_cache import drop_cached_pages, resident_fraction


def fraction_of(path: Path) -> float:
    fd = os.open(path, os.O_RDONLY)
    try:
        return resident_fraction(fd)
    finally:
        os.close(fd)


def test_dropped_pages_are_not_resident_until_read_again(tmp_path: Path) -> None:
    path = tmp_path / "shard.bin"
    path.write_bytes(os.urandom(1 << 20))
    assert fraction_of(path) == 1.0  # just written: every page is in the page cache

    assert drop_cached_pages(path) == 0.0
    assert fraction_of(path) == 0.0

    with path.open("rb") as stream:
        stream.read(1 << 20)
    assert fraction_of(path) == 1.0


def test_an_empty_file_has_no_pages(tmp_path: Path) -> None:
    path = tmp_path / "empty.bin"
    path.write_bytes(b"")
    assert drop_cached_pages(path) == 0.0
