"""Tables Hudi 1.x wrote (table versions 8 and 9), kept as the zips hudi-rs ships."""

from __future__ import annotations

import zipfile
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LANCE = "v9_lance_nonpartitioned"
ZIPS = {
    path.stem: path
    for version in ("hudi-v8", "hudi-v9")
    for path in (FIXTURES / version).glob("*.zip")
}
PARQUET_TABLES = sorted(name for name in ZIPS if name != LANCE)
"""Every copy-on-write table with Parquet base files."""
LIVE_ROWS = {
    "v8_empty": 0,
    "v9_txns_simple_overwrite": 3,
    "v9_timebasedkeygen_nonhivestyle": 5,
    "v9_timebasedkeygen_epochmillis": 6,
    "v9_timebasedkeygen_unixtimestamp": 6,
    "v9_txns_complex_meta": 12,
    "v9_txns_complex_nometa": 12,
    "v9_txns_simple_meta": 12,
    "v9_txns_simple_nometa": 12,
    "v9_txns_nonpart_meta": 14,
    "v9_txns_nonpart_nometa": 14,
}
"""Rows hudi-rs 0.5.0 reads (4 for the tables not listed)."""


def unzip_fixture(name: str, destination: Path) -> Path:
    """The table unpacked under ``destination`` (without macOS's ``__MACOSX`` and
    ``.DS_Store`` entries); the fixture itself is never modified."""
    with zipfile.ZipFile(ZIPS[name]) as archive:
        members = [
            member
            for member in archive.namelist()
            if not member.startswith("__MACOSX/") and not member.endswith(".DS_Store")
        ]
        archive.extractall(destination, members)
    return destination / name
