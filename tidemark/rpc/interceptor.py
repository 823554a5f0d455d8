"""Maps domain errors to gRPC status codes and binds a request id to every log line.

Servicers raise ``tidemark.errors`` exceptions and stay free of try/except: this
interceptor turns them into status codes (see ``status.STATUS_CODES``) with details
naming the field; anything else is a bug, logged with its traceback and returned as
INTERNAL carrying the request id so the log line can be found.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import grpc
import structlog

from tidemark.errors import TidemarkError
from tidemark.rpc.guard import current_code, guard_handler
from tidemark.rpc.status import REQUEST_ID_KEY, error_metadata, status_code_for

log = structlog.get_logger(__name__)


def request_id_from(metadata: tuple[tuple[str, str | bytes], ...] | None) -> str:
    """The caller's ``x-request-id`` (kept across its retries) or a fresh one."""
    for key, value in metadata or ():
        if key == REQUEST_ID_KEY and isinstance(value, str) and value:
            return value
    return uuid.uuid4().hex


class ErrorInterceptor(grpc.ServerInterceptor):
    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        method: str = handler_call_details.method
        metadata = handler_call_details.invocation_metadata

        @contextmanager
        def guard(context: grpc.ServicerContext) -> Iterator[None]:
            request_id = request_id_from(metadata)
            with structlog.contextvars.bound_contextvars(request_id=request_id, method=method):
                try:
                    yield
                except Exception as error:
                    if current_code(context) not in (None, grpc.StatusCode.OK):
                        raise  # the servicer aborted with an explicit status
                    _abort(context, error, request_id)

        return guard_handler(handler, guard)


def _abort(context: grpc.ServicerContext, error: Exception, request_id: str) -> None:
    code = status_code_for(error) if isinstance(error, TidemarkError) else None
    if isinstance(error, TidemarkError) and code is not None:
        log.info("request failed", code=code.name, error=str(error))
        context.set_trailing_metadata(error_metadata(error))
        context.abort(code, str(error))
    log.exception("unexpected error")
    context.abort(
        grpc.StatusCode.INTERNAL,
        f"internal error (request_id={request_id}): {type(error).__name__}",
    )
