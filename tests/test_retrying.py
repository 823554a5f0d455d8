"""The one retry policy and the one wait for a holder (tidemark/retrying.py), with their
sleeps recorded instead of slept."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tidemark.errors import ConflictError
from tidemark.retrying import RetryPolicy, waiting_for_holder


def failing(times: int, error: Exception) -> Callable[[], str]:
    """A call that raises ``error`` ``times`` times, then answers."""
    calls = []

    def call() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise error
        return f"answered after {len(calls)}"

    return call


def test_retries_back_off_with_jitter_and_wait_at_least_the_hint() -> None:
    sleeps: list[float] = []
    policy = RetryPolicy(max_attempts=4, initial_backoff_s=0.1, max_backoff_s=0.25)
    retrying = policy.retrying(lambda e: isinstance(e, OSError)).copy(sleep=sleeps.append)
    assert retrying(failing(3, OSError())) == "answered after 4"
    assert [0 <= s <= bound for s, bound in zip(sleeps, [0.1, 0.2, 0.25], strict=True)] == [
        True
    ] * 3
    hinted = policy.retrying(lambda e: True, hint_s=lambda e: 7.0).copy(sleep=sleeps.append)
    sleeps.clear()
    assert hinted(failing(2, OSError())) == "answered after 3"
    assert sleeps == [7.0, 7.0]


def test_the_last_error_ends_the_attempts_and_others_are_not_retried() -> None:
    sleeps: list[float] = []
    retrying = (
        RetryPolicy(max_attempts=2, initial_backoff_s=0.1, max_backoff_s=1.0)
        .retrying(lambda e: isinstance(e, OSError))
        .copy(sleep=sleeps.append)
    )
    with pytest.raises(OSError, match="gone"):
        retrying(failing(5, OSError("gone")))
    assert len(sleeps) == 1
    with pytest.raises(ValueError, match="bad"):
        retrying(failing(1, ValueError("bad")))
    assert len(sleeps) == 1


def test_a_holder_is_polled_with_backoff_jittered_between_half_and_all() -> None:
    sleeps: list[float] = []
    waiting = waiting_for_holder(1000, first_s=0.2, max_s=1.0).copy(sleep=sleeps.append)
    assert waiting(failing(5, ConflictError("held", field="table"))) == "answered after 6"
    bounds = [0.2, 0.4, 0.8, 1.0, 1.0]
    assert [b / 2 <= s <= b for s, b in zip(sleeps, bounds, strict=True)] == [True] * 5


def test_no_wait_tries_once() -> None:
    sleeps: list[float] = []
    waiting = waiting_for_holder(0, first_s=0.2, max_s=1.0).copy(sleep=sleeps.append)
    with pytest.raises(ConflictError, match="held"):
        waiting(failing(1, ConflictError("held", field="table")))
    assert sleeps == []
