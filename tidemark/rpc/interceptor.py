"""One server interceptor per call: admission (token, per-client limit), metrics,
domain-error mapping and the log context.

Servicers raise ``tidemark.errors`` exceptions and stay free of try/except: the
interceptor turns them into status codes (see ``status.STATUS_CODES``) with details
naming the field; anything else is a bug, logged with its traceback and returned as
INTERNAL carrying the request id so the log line can be found. A request whose bytes do
not decode as the method's message is INVALID_ARGUMENT (field ``request``), not the
UNKNOWN gRPC would answer. Every call is counted and timed per method and status code.

The hot path is a marker create of a few hundred microseconds, so the interceptor is
built for it: each method's handler is wrapped once and cached (``intercept_service``
runs for every call), the wrapper is one coroutine with a plain try/except, metric
counts are plain numbers per method (see ``RpcMetrics``), and the request id is computed only
when a log line or an error needs it.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import Any, cast

import grpc
import structlog
from google.protobuf.message import DecodeError

from tidemark.errors import InvalidArgumentError, TidemarkError
from tidemark.logs import bind_call_fields
from tidemark.rpc.auth import CallGuard, is_exempt
from tidemark.rpc.metrics import MethodMetrics, RpcMetrics
from tidemark.rpc.status import REQUEST_ID_KEY, error_metadata, status_code_for

log = structlog.get_logger(__name__)

Context = grpc.aio.ServicerContext[Any, Any]
Continuation = Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]]

_PROCESS_ID = uuid.uuid4().hex[:12]
_CALLS = itertools.count()


class CallFields(Mapping[str, str]):
    """``request_id`` and ``method`` of one call for its log lines: the caller's
    ``x-request-id`` (kept across its retries) or one unique per process and call,
    read from the metadata only when first asked for."""

    __slots__ = ("_context", "_method", "_request_id")

    def __init__(self, context: Context, method: str) -> None:
        self._context = context
        self._method = method
        self._request_id: str | None = None

    @property
    def request_id(self) -> str:
        if self._request_id is None:
            self._request_id = _request_id_from(self._context.invocation_metadata())
        return self._request_id

    def __getitem__(self, key: str) -> str:
        if key == "request_id":
            return self.request_id
        if key == "method":
            return self._method
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(("request_id", "method"))

    def __len__(self) -> int:
        return 2


def _request_id_from(metadata: Any) -> str:
    for key, value in metadata or ():
        if key == REQUEST_ID_KEY and isinstance(value, str) and value:
            return value
    return f"{_PROCESS_ID}-{next(_CALLS):x}"


class ServerCallInterceptor(grpc.aio.ServerInterceptor):
    """Wraps each method's handler once (admission, metrics, error mapping, log context);
    health and reflection skip admission."""

    def __init__(self, metrics: RpcMetrics, guard: CallGuard) -> None:
        self._metrics = metrics
        self._guard = guard
        self._handlers: dict[str, grpc.RpcMethodHandler] = {}

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        method: str = handler_call_details.method
        wrapped = self._handlers.get(method)
        if wrapped is None:
            handler = await continuation(handler_call_details)
            if handler is None:
                return handler  # unknown method: not cached, callers choose these names
            guard = self._guard if self._guard.active and not is_exempt(method) else None
            wrapped = self._handlers[method] = _observed(
                handler, method, self._metrics.for_method(method), guard
            )
        return wrapped


def _observed(
    handler: grpc.RpcMethodHandler,
    method: str,
    metrics: MethodMetrics,
    guard: CallGuard | None,
) -> grpc.RpcMethodHandler:
    """A handler equivalent to ``handler`` whose calls are admitted by ``guard`` (None =
    exempt) and observed. Behaviors are coroutines (unary responses, or streams written
    with ``context.write`` as grpc_health's Watch does) or async generators (streams);
    for those the whole iteration is observed, so errors raised mid-stream are mapped
    too."""
    behavior = cast(
        Callable[[Any, Context], Any],
        handler.unary_unary
        or handler.unary_stream
        or handler.stream_unary
        or handler.stream_stream,
    )

    checked = _checked_stream if handler.request_streaming else _checked

    async def unary_response(request: Any, context: Context) -> Any:
        began = metrics.start()
        fields = CallFields(context, method)
        bind_call_fields(fields)
        client = None
        try:
            client = guard and await guard.admit(context)
            response = await behavior(checked(request), context)
        except BaseException as error:
            await _fail(context, error, fields, metrics, began)
            raise
        finally:
            if guard and client:
                guard.release(client)
        metrics.finish(began, context.code() or grpc.StatusCode.OK)
        return response

    async def streaming_response(request: Any, context: Context) -> AsyncIterator[Any]:
        began = metrics.start()
        fields = CallFields(context, method)
        bind_call_fields(fields)
        client = None
        try:
            client = guard and await guard.admit(context)
            async for response in behavior(checked(request), context):
                yield response
        except BaseException as error:
            await _fail(context, error, fields, metrics, began)
            raise
        finally:
            if guard and client:
                guard.release(client)
        metrics.finish(began, context.code() or grpc.StatusCode.OK)

    serializers = {
        "request_deserializer": _tolerant(handler.request_deserializer),
        "response_serializer": handler.response_serializer,
    }
    streams = streaming_response if inspect.isasyncgenfunction(behavior) else unary_response
    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(streams, **serializers)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(unary_response, **serializers)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(streams, **serializers)
    return grpc.unary_unary_rpc_method_handler(unary_response, **serializers)


class _Undecodable:
    """What ``_tolerant`` deserializes bytes that are not the method's message into."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _tolerant(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    """``deserializer`` answering ``_Undecodable`` instead of raising, so the call reaches
    the wrapper, which refuses it with INVALID_ARGUMENT."""
    if deserializer is None:
        return None

    def deserialize(data: bytes) -> Any:
        try:
            return deserializer(data)
        except DecodeError as error:
            return _Undecodable(str(error))

    return deserialize


def _checked(request: Any) -> Any:
    if isinstance(request, _Undecodable):
        raise InvalidArgumentError(f"not a valid message: {request.reason}", field="request")
    return request


async def _checked_stream(requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
    async for request in requests:
        yield _checked(request)


async def _fail(
    context: Context,
    error: BaseException,
    fields: CallFields,
    metrics: MethodMetrics,
    began: float,
) -> None:
    """Count a failed call and abort it with its mapped status (``context.abort``
    raises); return, so the caller re-raises, when the call was cancelled or the
    servicer already aborted with an explicit status."""
    if not isinstance(error, Exception):
        cancelled = isinstance(error, asyncio.CancelledError | GeneratorExit)
        metrics.finish(began, grpc.StatusCode.CANCELLED if cancelled else grpc.StatusCode.UNKNOWN)
        return
    explicit = context.code()
    if explicit not in (None, grpc.StatusCode.OK):
        metrics.finish(began, explicit)
        return
    code = status_code_for(error) if isinstance(error, TidemarkError) else None
    if isinstance(error, TidemarkError) and code is not None:
        metrics.finish(began, code)
        log.info("request failed", code=code.name, error=str(error))
        await context.abort(code, str(error), trailing_metadata=error_metadata(error))
    metrics.finish(began, grpc.StatusCode.INTERNAL)
    log.exception("unexpected error")
    await context.abort(
        grpc.StatusCode.INTERNAL,
        f"internal error (request_id={fields.request_id}): {type(error).__name__}",
    )
