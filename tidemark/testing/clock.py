"""A clock a test moves forward (``tidemark.clock.Clock``), for leases and locks."""

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
