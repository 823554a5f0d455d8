"""The time leases and locks read: handed to them, so a test moves it forward instead of
sleeping until another holder's lease runs out."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Wall time for what is stored and compared across processes (a lease's end), the
    monotonic time for this process's own deadlines (a holder's safety margin)."""

    def now(self) -> float:
        """Seconds since the epoch."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary start that never goes back."""
        ...


class SystemClock:
    """The host's clocks."""

    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()


SYSTEM_CLOCK = SystemClock()
