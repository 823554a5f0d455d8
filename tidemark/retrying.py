"""Retry and wait policies, one place, on tenacity: every retry of a failed request (RPC
calls, storage requests, the index replicas' rounds) and every wait for a holder to let
go (the table lock's poll, a marker dir's owner) is a ``Retrying`` built here.

Retries back off exponentially with full jitter (a random wait below the exponential
bound), so clients failing together do not come back in step, and wait at least the
retry hint a server gave. Waits for a holder poll with backoff jittered between half and
all of the bound: a waiter neither hammers the holder's storage nor sleeps past the end
of its own wait."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential,
    wait_random_exponential,
)
from tenacity.stop import stop_base

from tidemark.errors import ConflictError

RetryHook = Callable[[RetryCallState], None]


@dataclass(frozen=True)
class RetryPolicy:
    """How often, and for how long, a failing request is tried again."""

    max_attempts: int
    """Attempts, the first included."""
    initial_backoff_s: float
    """Bound of the first backoff; it doubles after each failed attempt..."""
    max_backoff_s: float
    """... up to this."""
    max_total_s: float | None = None
    """No attempt starts after this long (None: attempts alone bound the retries)."""

    def retrying(
        self,
        retryable: Callable[[BaseException], bool],
        *,
        hint_s: Callable[[BaseException], float] | None = None,
        before_sleep: RetryHook | None = None,
        reraise: bool = True,
    ) -> Retrying:
        """Retries of the errors ``retryable`` accepts; ``hint_s`` reads a failed
        attempt's retry hint (the least wait), ``before_sleep`` sees each retry.
        ``reraise`` False ends an exhausted retry in tenacity's ``RetryError``."""
        stop: stop_base = stop_after_attempt(self.max_attempts)
        if self.max_total_s is not None:
            stop = stop | stop_after_delay(self.max_total_s)
        backoff = wait_random_exponential(multiplier=self.initial_backoff_s, max=self.max_backoff_s)

        def wait(state: RetryCallState) -> float:
            error = state.outcome.exception() if state.outcome else None
            hint = hint_s(error) if hint_s is not None and error is not None else 0.0
            return max(backoff(state), hint)

        return Retrying(
            stop=stop,
            wait=wait,
            retry=retry_if_exception(retryable),
            before_sleep=before_sleep,
            reraise=reraise,
        )


def waiting_for_holder(
    wait_s: float, *, first_s: float, max_s: float, before_sleep: RetryHook | None = None
) -> Retrying:
    """Tries again while an attempt raises ConflictError (someone else holds what it
    takes), for up to ``wait_s`` (0: once), polling after ``first_s`` and doubling to
    ``max_s``, each poll jittered between half and all of that; the last ConflictError is
    raised once the wait is over."""
    half = wait_exponential(multiplier=first_s / 2, max=max_s / 2)
    jittered = half + wait_random_exponential(multiplier=first_s / 2, max=max_s / 2)

    def wait(state: RetryCallState) -> float:
        return max(0.0, min(wait_s - (state.seconds_since_start or 0.0), jittered(state)))

    return Retrying(
        stop=stop_after_delay(wait_s),
        wait=wait,
        retry=retry_if_exception_type(ConflictError),
        before_sleep=before_sleep,
        reraise=True,
    )
