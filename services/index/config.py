"""Index service settings, from ``TIDEMARK_INDEX_*`` env vars (or overrides), validated."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from tidemark.checks import require_positive
from tidemark.config import MIB, load_config
from tidemark.errors import ConfigError

SECTION = "index"


@dataclasses.dataclass(frozen=True)
class IndexConfig:
    block_cache_bytes: int = 256 * MIB
    """Memory for decoded shard blocks and open shard readers, shared by every table."""
    max_batch_keys: int = 1_000_000
    """Keys (or changes) per call; beyond it INVALID_ARGUMENT. Clients send 100k."""
    max_key_bytes: int = 1024
    """Longest record key in UTF-8 bytes a call may carry; a longer one is INVALID_ARGUMENT
    naming this limit (Hudi keys are short; a huge one would bloat every shard block)."""
    max_open_tables: int = 64
    """Tables whose index is held open; the least recently used beyond it is closed."""
    recheck_s: float = 1.0
    """How often an open index checks that ``index.properties`` is still the one it
    opened (a rebuild replaces it), at most once per this many seconds."""
    compact_deltas: int = 8
    """Visible deltas in one shard that make the background compactor fold that shard's
    deltas into a new base: a lookup searches them as one merged view, which holds at most
    about this many files' entries and is rebuilt (a scan of them) when they change."""
    compact_interval_s: float = 10.0
    """How often the background compactor checks the open tables (a stage call also wakes
    it)."""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            require_positive(field.name, getattr(self, field.name), error=ConfigError)

    @classmethod
    def load(
        cls, overrides: Mapping[str, object] | None = None, environ: Mapping[str, str] | None = None
    ) -> IndexConfig:
        """Overrides (flags) beat ``TIDEMARK_INDEX_<FIELD>`` env vars, which beat defaults."""
        return load_config(cls, section=SECTION, overrides=overrides, environ=environ)
