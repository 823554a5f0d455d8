"""What the generators of committed pages share: the generated block between two marker
comments, and writing the page or, with ``--check``, failing while it is stale."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path


def replace_block(text: str, begin: str, end: str, block: str) -> str:
    """``text`` with everything from ``begin`` to ``end`` (markers included) replaced."""
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        raise SystemExit(f"no generated block: add the lines {begin} and {end}")
    return text[:start] + block + text[stop + len(end) :]


def update_page(page: Path, regenerate: Callable[[str], str], *, check: bool, run: str) -> int:
    """Rewrite ``page`` with ``regenerate(its text)``; with ``check``, change nothing and
    return 1 when that differs from the page, saying to ``run`` the generator."""
    current = page.read_text()
    fresh = regenerate(current)
    if not check:
        page.write_text(fresh)
        return 0
    if fresh == current:
        return 0
    print(f"{page} is stale: run {run}", file=sys.stderr)
    return 1
