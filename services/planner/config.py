"""Planner service settings, from ``TIDEMARK_PLANNER_*`` env vars (or overrides), validated."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from tidemark.checks import require_non_negative, require_positive
from tidemark.config import load_config
from tidemark.errors import ConfigError
from tidemark.table.leases.storage_lease import DEFAULT_LOCK_LEASE_S, DEFAULT_LOCK_WAIT_S

SECTION = "planner"


@dataclasses.dataclass(frozen=True)
class PlannerConfig:
    lock_wait_s: float = DEFAULT_LOCK_WAIT_S
    """How long a schedule or cancel waits for the table lock a writer holds before
    answering FAILED_PRECONDITION (0: at once), as every command's ``--lock-wait-s``."""
    lock_lease_s: float = DEFAULT_LOCK_LEASE_S
    """Lease of the table lock the planner takes (renewed by a heartbeat)."""
    hot_commits: int = 0
    """A plan leaves out the file groups the table's last N commits wrote (a streaming
    writer still updates them; 0: none), unless its request says otherwise."""
    hot_minutes: int = 0
    """A plan leaves out the file groups written in the last T minutes (0: none), unless
    its request says otherwise."""
    trigger_poll_s: float = 10.0
    """How often the trigger loop looks at the watched tables' timelines."""
    tables: tuple[str, ...] = ()
    """Tables whose policies (clustering trigger, retention, compaction) the service follows
    from its start, and whose compaction backlog it exports when they are merge-on-read; a
    table given a policy through this service is followed too."""

    def __post_init__(self) -> None:
        for name in ("lock_lease_s", "trigger_poll_s"):
            require_positive(name, getattr(self, name), error=ConfigError)
        for name in ("hot_commits", "hot_minutes", "lock_wait_s"):
            require_non_negative(name, getattr(self, name), error=ConfigError)
        if self.lock_lease_s < 1:
            raise ConfigError(
                f"must be at least 1 second, got {self.lock_lease_s}", field="lock_lease_s"
            )

    @classmethod
    def load(
        cls, overrides: Mapping[str, object] | None = None, environ: Mapping[str, str] | None = None
    ) -> PlannerConfig:
        """Overrides beat ``TIDEMARK_PLANNER_<FIELD>`` env vars, which beat defaults."""
        return load_config(cls, section=SECTION, overrides=overrides, environ=environ)
