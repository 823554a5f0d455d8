"""Retry policy for storage requests: throttling and transient failures only.

botocore's own retries are switched off so that every attempt is visible here: each
attempt is counted as a request, and exhaustion becomes an ``UnavailableError`` naming
the path. Client errors (403, 404, 400...) are never retried; they are not transient.
The backoff is ``tidemark.retrying``'s (exponential with full jitter, from
``INITIAL_BACKOFF_S`` up to ``MAX_BACKOFF_S``), the attempts TIDEMARK_STORAGE_MAX_ATTEMPTS.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

import structlog
from botocore.exceptions import (
    ClientError,
    HTTPClientError,
    IncompleteReadError,
)
from botocore.exceptions import (
    ConnectionError as BotocoreConnectionError,
)
from tenacity import RetryCallState, RetryError

from tidemark.errors import ConfigError, UnavailableError
from tidemark.retrying import RetryPolicy
from tidemark.storage.base import RequestCounter

T = TypeVar("T")

log = structlog.get_logger(__name__)

MAX_ATTEMPTS_ENV = "TIDEMARK_STORAGE_MAX_ATTEMPTS"
DEFAULT_MAX_ATTEMPTS = 6
INITIAL_BACKOFF_S = 0.05
MAX_BACKOFF_S = 2.0

RETRYABLE_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestLimitExceeded",
        "RequestThrottled",
        "InternalError",
        "ServiceUnavailable",
        "RequestTimeout",
        "ConditionalRequestConflict",
    }
)
RETRYABLE_STATUSES = frozenset({500, 502, 503, 504})


def max_attempts() -> int:
    """Attempts per request (first try included), from TIDEMARK_STORAGE_MAX_ATTEMPTS."""
    raw = os.environ.get(MAX_ATTEMPTS_ENV)
    if raw is None:
        return DEFAULT_MAX_ATTEMPTS
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigError(f"must be a positive integer, got {raw!r}", field=MAX_ATTEMPTS_ENV)
    return value


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def error_status(error: ClientError) -> int:
    return int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


def is_retryable(error: BaseException) -> bool:
    """Throttling, 5xx, request timeouts, conditional-write conflicts and broken connections."""
    if isinstance(error, ClientError):
        return error_code(error) in RETRYABLE_CODES or error_status(error) in RETRYABLE_STATUSES
    return isinstance(error, BotocoreConnectionError | HTTPClientError | IncompleteReadError)


def call_with_retry(
    fn: Callable[[], T], *, operation: str, path: str, requests: RequestCounter
) -> T:
    """Run ``fn`` (one storage request) with the policy, counting every attempt."""

    def counted() -> T:
        requests.add(operation)
        return fn()

    def log_retry(state: RetryCallState) -> None:
        requests.add_retry(operation)
        outcome = state.outcome
        log.warning(
            "storage_retry",
            operation=operation,
            path=path,
            attempt=state.attempt_number,
            error=repr(outcome.exception()) if outcome else None,
        )

    attempts = max_attempts()
    retrying = RetryPolicy(attempts, INITIAL_BACKOFF_S, MAX_BACKOFF_S).retrying(
        is_retryable, before_sleep=log_retry, reraise=False
    )
    try:
        return retrying(counted)
    except RetryError as exhausted:
        cause = exhausted.last_attempt.exception()
        raise UnavailableError(
            f"storage {operation} of {path!r} failed after {attempts} attempts: {cause}",
            field="path",
        ) from cause
