"""Trigger policies: when the planner schedules a table's clustering by itself (the
loop that follows them is ``triggers.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from tidemark.checks import require_non_negative
from tidemark.clustering.strategy import PlanOptions
from tidemark.errors import InvalidArgumentError


@dataclass(frozen=True)
class TriggerPolicy:
    """At most one of ``every_n_commits`` and ``every_seconds`` is set; neither means on
    demand."""

    every_n_commits: int = 0
    every_seconds: int = 0
    options: PlanOptions = field(default_factory=PlanOptions)

    def __post_init__(self) -> None:
        for name in ("every_n_commits", "every_seconds"):
            require_non_negative(name, getattr(self, name))
        if self.every_n_commits and self.every_seconds:
            raise InvalidArgumentError(
                "choose every_n_commits or every_seconds, not both", field="policy"
            )

    @property
    def on_demand(self) -> bool:
        return not self.every_n_commits and not self.every_seconds

    def describe(self) -> str:
        if self.every_n_commits:
            return f"after every {self.every_n_commits} commits"
        if self.every_seconds:
            return f"every {self.every_seconds} s"
        return "on demand"
