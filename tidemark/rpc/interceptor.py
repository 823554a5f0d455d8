"""Maps domain errors to gRPC status codes and binds a request id to every log line.

Servicers raise ``tidemark.errors`` exceptions and stay free of try/except: this
interceptor turns them into status codes (see ``status.STATUS_CODES``) with details
naming the field; anything else is a bug, logged with its traceback and returned as
INTERNAL carrying the request id so the log line can be found.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

import grpc
import structlog

from tidemark.errors import TidemarkError
from tidemark.rpc.guard import Guard, GuardingInterceptor, current_code
from tidemark.rpc.status import REQUEST_ID_KEY, error_metadata, status_code_for

log = structlog.get_logger(__name__)


_PROCESS_ID = uuid.uuid4().hex[:12]
_CALLS = itertools.count()


def request_id_from(metadata: Iterable[tuple[str, str | bytes]] | None) -> str:
    """The caller's ``x-request-id`` (kept across its retries) or a fresh one: unique
    per process and call, without a uuid per call on the hot path."""
    for key, value in metadata or ():
        if key == REQUEST_ID_KEY and isinstance(value, str) and value:
            return value
    return f"{_PROCESS_ID}-{next(_CALLS):x}"


class ErrorInterceptor(GuardingInterceptor):
    def guard_for(self, method: str) -> Guard:
        @asynccontextmanager
        async def guard(context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[None]:
            request_id = request_id_from(context.invocation_metadata())
            with structlog.contextvars.bound_contextvars(request_id=request_id, method=method):
                try:
                    yield
                except Exception as error:
                    if current_code(context) not in (None, grpc.StatusCode.OK):
                        raise  # the servicer aborted with an explicit status
                    await _abort(context, error, request_id)

        return guard


async def _abort(
    context: grpc.aio.ServicerContext[Any, Any], error: Exception, request_id: str
) -> None:
    code = status_code_for(error) if isinstance(error, TidemarkError) else None
    if isinstance(error, TidemarkError) and code is not None:
        log.info("request failed", code=code.name, error=str(error))
        await context.abort(code, str(error), trailing_metadata=error_metadata(error))
    log.exception("unexpected error")
    await context.abort(
        grpc.StatusCode.INTERNAL,
        f"internal error (request_id={request_id}): {type(error).__name__}",
    )
