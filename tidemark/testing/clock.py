"""Clocks a test moves forward (``tidemark.clock.Clock``), for leases and locks."""

from __future__ import annotations

import threading
import time


class AdvancingClock:
    """The host's time plus what the test advanced it by: leases written by other processes
    (at the host's time) compare as they would that much later, and time keeps flowing for
    the threads that renew them."""

    def __init__(self) -> None:
        self._offset_s = 0.0
        self._lock = threading.Lock()

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"a clock never goes back, got {seconds}")
        with self._lock:
            self._offset_s += seconds

    def now(self) -> float:
        return time.time() + self._offset_s

    def monotonic(self) -> float:
        return time.monotonic() + self._offset_s


class ManualClock(AdvancingClock):
    """Time that stands still until the test advances it: a lease's safety margin or an
    idle timeout runs out at the step the test takes, never because a loaded machine
    stalled a thread (what a short real lease did at load 20)."""

    def __init__(self) -> None:
        super().__init__()
        self._start_s = time.time()
        self._start_monotonic = time.monotonic()

    def now(self) -> float:
        return self._start_s + self._offset_s

    def monotonic(self) -> float:
        return self._start_monotonic + self._offset_s
