"""Run as a script by the fault tests: a write that stops at a named stage event, says so
on stdout and waits there until the test kills it (SIGKILL, no clean-up).

Usage: outcome_writer.py SPEC_JSON (see ``faultkit.start_stopping_writer``).
"""

from __future__ import annotations

import json
import sys

from tidemark.jobs.session import build_session
from tidemark.jobs.write import write
from tidemark.jobs.write_options import WriteOptions

SCHEMA = "id int, name string, part string, ts long"
"""``faultkit.SCHEMA`` (this script runs on its own, without the test packages)."""


class StopAt:
    """Stage listener that parks the driver at ``started:<stage>`` or ``finished:<stage>``."""

    def __init__(self, event: str) -> None:
        self.event = event

    def stage_started(self, name: str) -> None:
        self._maybe_stop(f"started:{name}")

    def stage_finished(self, name: str, seconds: float) -> None:
        self._maybe_stop(f"finished:{name}")

    def _maybe_stop(self, event: str) -> None:
        if event == self.event:
            print("stopped", flush=True)
            sys.stdin.read()


if __name__ == "__main__":
    spec = json.loads(sys.argv[1])
    spark = build_session("local[2]", shuffle_partitions=2)
    service = spec["marker_service"]
    write(
        spark,
        spark.createDataFrame([tuple(row) for row in spec["rows"]], SCHEMA),
        spec["table"],
        spec["operation"],
        WriteOptions(
            markers="service" if service else "direct",
            marker_service_address=service,
            lock_lease_s=spec["lock_lease_s"],
            idempotency_key=spec["idempotency_key"],
            **spec["keys"],
        ),
        listener=StopAt(spec["stop_at"]),
    )
    print("finished without stopping", flush=True)
