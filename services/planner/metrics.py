"""Prometheus view of the planner engine: plans scheduled and "nothing to cluster"
answers by trigger and table, plans cancelled or given up to writers, compaction schedules
and each merge-on-read table's compaction backlog (pending plans, the oldest one's age,
log bytes), and the tables whose policies it follows. Read from the engine's counters and
the backlogs its trigger loop last read, at scrape time."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tidemark.table.timeline.instant import instant_epoch_s

if TYPE_CHECKING:
    from tidemark.services.planner.engine import PlannerEngine


class PlannerMetrics(Collector):
    def __init__(self, engine: PlannerEngine) -> None:
        self.engine = engine

    def collect(self) -> Iterator[Metric]:
        outcomes = CounterMetricFamily(
            "tidemark_planner_schedules",
            "Schedule attempts by outcome (scheduled, nothing), trigger (request, commits, "
            "periodic) and table.",
            labels=["outcome", "trigger", "table"],
        )
        for labels, count in sorted(self.engine.schedules.copy().items()):
            outcomes.add_metric(list(labels), count)
        yield outcomes
        counts = self.engine.counts.copy()
        yield CounterMetricFamily(
            "tidemark_planner_cancelled",
            "Plans cancelled (rolled back).",
            value=counts["cancelled"],
        )
        yield CounterMetricFamily(
            "tidemark_planner_plans_given_up",
            "Plans writers rolled back to take their file groups, as this service found them "
            "in the writers' commits (when scheduling or listing).",
            value=counts["given_up"],
        )
        runs = CounterMetricFamily(
            "tidemark_planner_retention_runs",
            "Retention runs (clean then archive) by trigger (request, commits, periodic).",
            labels=["trigger"],
        )
        retained = self.engine.retention_runs.copy()
        for trigger in ("request", "commits", "periodic"):
            runs.add_metric([trigger], retained[trigger])
        yield runs
        yield CounterMetricFamily(
            "tidemark_planner_retention_files_deleted",
            "Data files retention runs cleaned.",
            value=retained["files_deleted"],
        )
        yield CounterMetricFamily(
            "tidemark_planner_retention_instants_archived",
            "Instants retention runs moved to the archived timeline.",
            value=retained["instants_archived"],
        )
        yield from self._compaction()
        yield GaugeMetricFamily(
            "tidemark_planner_watched_tables",
            "Tables whose trigger policies this service follows.",
            value=len(self.engine.triggers.watched()),
        )

    def _compaction(self) -> Iterator[Metric]:
        schedules = CounterMetricFamily(
            "tidemark_planner_compaction_schedules",
            "Compaction schedule attempts by outcome (scheduled, nothing, cancelled), trigger "
            "(request, policy) and table.",
            labels=["outcome", "trigger", "table"],
        )
        for labels, count in sorted(self.engine.compactions.copy().items()):
            schedules.add_metric(list(labels), count)
        yield schedules
        pending = GaugeMetricFamily(
            "tidemark_planner_compaction_pending_plans",
            "Pending (requested or inflight) compaction plans of each watched merge-on-read table.",
            labels=["table"],
        )
        oldest = GaugeMetricFamily(
            "tidemark_planner_compaction_oldest_pending_seconds",
            "Age of the oldest pending compaction plan of each watched merge-on-read table "
            "(0: none).",
            labels=["table"],
        )
        log_bytes = GaugeMetricFamily(
            "tidemark_planner_compaction_log_bytes",
            "Bytes of the log files in the latest file slices of each watched merge-on-read "
            "table (what snapshot reads merge).",
            labels=["table"],
        )
        now = time.time()
        for table, backlog in sorted(self.engine.compaction.backlogs().items()):
            pending.add_metric([table], backlog.pending)
            age = now - instant_epoch_s(backlog.oldest_pending) if backlog.oldest_pending else 0
            oldest.add_metric([table], max(age, 0.0))
            log_bytes.add_metric([table], backlog.log_bytes)
        yield pending
        yield oldest
        yield log_bytes
