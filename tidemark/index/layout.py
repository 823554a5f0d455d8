"""Where a table's record index lives and what its small JSON/properties files hold.

Everything is under ``.hoodie/.tidemark/record-index/`` (Hudi readers and hudi-rs skip
``.hoodie/``)::

    index.properties                       written last by a build: "this table has an index"
    shards/00007/base_<instant>.tmi        shard 7's entries as of <instant>
    shards/00007/delta_<instant>_<id>.tmi  one stage call's changes for shard 7
    staged/<instant>_<id>.json             that stage call's manifest (written first)
    bases/<instant>.json                   each shard's base instant after a compaction
    compaction-lock/<generation>           lease of the one compaction running (any process)

Manifests let a reader learn every delta with one listing of ``staged/`` instead of one
listing per shard; the ``bases/`` record (newest wins) does the same for compactions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tidemark.storage.base import Storage
from tidemark.storage.damaged import read_parsed
from tidemark.table.properties.config import format_properties, parse_properties

ROOT = ".hoodie/.tidemark/record-index"
PROPERTIES_PATH = f"{ROOT}/index.properties"
STAGED_DIR = f"{ROOT}/staged"
BASES_DIR = f"{ROOT}/bases"
SHARDS_DIR = f"{ROOT}/shards"
COMPACTION_LOCK_DIR = f"{ROOT}/compaction-lock"
BUILD_LEASE_DIR = ".hoodie/.tidemark/index-build"
"""The lease of a running build (outside ``ROOT``, which a build deletes): one build of a
table at a time, and writers asking for the index can see one is under way."""
SHARD_FILE_SUFFIX = ".tmi"
FORMAT_VERSION = 1
REBUILD = "rebuild the index with `tidemark index build --rebuild`"
"""The way out of a damaged index file: the index is derived data, built again from the
table's files (a lookup never answers from a damaged file)."""

_VERSION_KEY = "tidemark.record.index.format.version"
_SHARDS_KEY = "tidemark.record.index.shards"
_AS_OF_KEY = "tidemark.record.index.as.of"


def shard_dir(shard: int) -> str:
    return f"{SHARDS_DIR}/{shard:05d}"


def base_path(shard: int, instant: str) -> str:
    return f"{shard_dir(shard)}/base_{instant}{SHARD_FILE_SUFFIX}"


def delta_path(shard: int, instant: str, stage_id: str) -> str:
    return f"{shard_dir(shard)}/delta_{instant}_{stage_id}{SHARD_FILE_SUFFIX}"


@dataclass(frozen=True)
class IndexProperties:
    """``index.properties``: format version, shard count, the instant the build read."""

    num_shards: int
    as_of: str
    format_version: int = FORMAT_VERSION

    def to_bytes(self) -> bytes:
        return format_properties(
            {
                _VERSION_KEY: str(self.format_version),
                _SHARDS_KEY: str(self.num_shards),
                _AS_OF_KEY: self.as_of,
            },
            comment="Tidemark record index",
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> IndexProperties:
        """KeyError or ValueError when ``data`` is not an ``index.properties``."""
        props = parse_properties(data.decode(), unique=True)
        return cls(int(props[_SHARDS_KEY]), props[_AS_OF_KEY], int(props[_VERSION_KEY]))

    @classmethod
    def read(cls, storage: Storage) -> IndexProperties:
        """NotFoundError when the table has no index; DataLossError naming the file (and
        the way out) when it is damaged."""
        return read_parsed(storage, PROPERTIES_PATH, cls.from_bytes, REBUILD)


@dataclass(frozen=True)
class StageManifest:
    """One stage call: its instant, id (a digest of its files) and delta file per shard."""

    instant: str
    stage_id: str
    shards: tuple[int, ...]

    @property
    def name(self) -> str:
        return f"{self.instant}_{self.stage_id}"

    @property
    def path(self) -> str:
        return f"{STAGED_DIR}/{self.name}.json"

    def delta_paths(self) -> list[str]:
        return [delta_path(shard, self.instant, self.stage_id) for shard in self.shards]

    def to_bytes(self) -> bytes:
        return json.dumps(
            {"instant": self.instant, "stage_id": self.stage_id, "shards": list(self.shards)}
        ).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> StageManifest:
        """ValueError, KeyError or TypeError when ``data`` is not a stage manifest."""
        doc = json.loads(data)
        shards = tuple(doc["shards"])
        if not isinstance(doc["instant"], str) or not all(isinstance(s, int) for s in shards):
            raise ValueError(f"not a stage manifest: {data[:100]!r}")
        return cls(doc["instant"], str(doc["stage_id"]), shards)


def bases_path(instant: str) -> str:
    return f"{BASES_DIR}/{instant}.json"
