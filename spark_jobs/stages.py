"""Named, timed stages of a job, reported to an optional listener (e.g. a progress bar)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol


class StageListener(Protocol):
    def stage_started(self, name: str) -> None: ...

    def stage_finished(self, name: str, seconds: float) -> None: ...


class StageClock:
    """Seconds spent per stage, in the order the stages ran."""

    def __init__(self, listener: StageListener | None = None) -> None:
        self.seconds: dict[str, float] = {}
        self._listener = listener

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        if self._listener is not None:
            self._listener.stage_started(name)
        started = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - started
            self.seconds[name] = self.seconds.get(name, 0.0) + elapsed
            if self._listener is not None:
                self._listener.stage_finished(name, elapsed)
