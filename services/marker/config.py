"""Marker service settings, from ``TIDEMARK_MARKER_*`` env vars (or overrides), validated."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from tidemark.checks import require_positive
from tidemark.config import load_config
from tidemark.errors import ConfigError

SECTION = "marker"


@dataclasses.dataclass(frozen=True)
class MarkerConfig:
    """Defaults follow Hudi's timeline server (50 ms batches, 20 files per marker dir)."""

    batch_interval_ms: int = 50
    """Batch interval: creates wait for the next tick and are flushed together (Hudi
    ``hoodie.markers.timeline_server_based.batch.interval_ms``)."""
    num_marker_files: int = 20
    """``MARKERS<i>`` files flushed concurrently per marker dir (Hudi
    ``hoodie.markers.timeline_server_based.batch.num_threads``)."""
    queue_limit: int = 1_000_000
    """Markers accepted but not yet answered, over all dirs; beyond it RESOURCE_EXHAUSTED."""
    idle_evict_s: float = 600.0
    """A marker dir unused this long is dropped from memory and its lease released."""
    lease_s: float = 60.0
    """Lifetime of a marker dir lease; renewed every third of it while the dir is in memory.
    A replica that dies keeps its dirs this long before another replica takes them over
    (writers wait meanwhile)."""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            require_positive(field.name, getattr(self, field.name), error=ConfigError)
        if self.num_marker_files > 1000:
            raise ConfigError(
                f"at most 1000 files per marker dir, got {self.num_marker_files}",
                field="num_marker_files",
            )
        if self.lease_s < 1:
            raise ConfigError(f"must be at least 1 second, got {self.lease_s}", field="lease_s")

    @classmethod
    def load(
        cls, overrides: Mapping[str, object] | None = None, environ: Mapping[str, str] | None = None
    ) -> MarkerConfig:
        """Overrides (flags) beat ``TIDEMARK_MARKER_<FIELD>`` env vars, which beat defaults."""
        return load_config(cls, section=SECTION, overrides=overrides, environ=environ)
