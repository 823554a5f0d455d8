"""One server interceptor per call: admission (token, role, per-client limit), reading
bulk requests within the caller's share of the request budget, metrics, domain-error
mapping and the log context.

Servicers raise ``tidemark.errors`` exceptions and stay free of try/except: the
interceptor turns them into status codes (see ``status.STATUS_CODES``) with details
naming the field; anything else is a bug, logged with its traceback and returned as
INTERNAL carrying the request id so the log line can be found. A request whose bytes do
not decode as the method's message is INVALID_ARGUMENT (field ``request``), not the
UNKNOWN gRPC would answer. Every call is counted and timed per method and status code.

A call that must be admitted takes its request as raw bytes, so nothing is read before
the token and the role are checked; on the bulk server (``BulkReading``) each message is
read only once its caller reserved the server's receive limit from the budget, and
within the idle time, so a half-sent request or a stream that stopped sending holds no
memory for long.

The hot path is a marker create of a few hundred microseconds, so the interceptor is
built for it: each method's handler is wrapped once and cached (``intercept_service``
runs for every call), the wrapper is one coroutine with a plain try/except, metric
counts are plain numbers per method (see ``RpcMetrics``), and the request id is computed only
when a log line or an error needs it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import itertools
import traceback
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import Any, cast

import grpc
import structlog
from google.protobuf.message import DecodeError

from tidemark.errors import (
    InvalidArgumentError,
    NotOwnerError,
    PermissionDeniedError,
    ResourceExhaustedError,
    TidemarkError,
)
from tidemark.logs import bind_call_fields
from tidemark.rpc.auth import DENIED_CALLS, CallGuard, Role, call_client_name, is_exempt
from tidemark.rpc.limits import DEFAULT_POLICY, PARSED_FACTOR, ByteBudget, MethodPolicy
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


@dataclasses.dataclass(frozen=True)
class BulkReading:
    """How the bulk server reads requests: each message once its caller holds
    ``reserve`` bytes (the server's receive limit: what gRPC may buffer for it) of
    ``budget``, and within ``idle_s``."""

    budget: ByteBudget
    reserve: int
    idle_s: float


class ServerCallInterceptor(grpc.aio.ServerInterceptor):
    """Wraps each method's handler once (admission, limits, metrics, error mapping, log
    context); health, reflection and routes skip admission."""

    def __init__(
        self,
        metrics: RpcMetrics,
        guard: CallGuard,
        policies: Mapping[str, MethodPolicy],
        max_message_bytes: int,
        reading: BulkReading | None,
    ) -> None:
        self._metrics = metrics
        self._guard = guard
        self._policies = policies
        self._max_message_bytes = max_message_bytes
        self._reading = reading
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
            policy = self._policies.get(method, DEFAULT_POLICY)
            edge = _Edge(
                guard=guard,
                role=policy.role,
                limit=min(policy.request_bytes, self._max_message_bytes),
                reading=self._reading,
            )
            metrics = self._metrics.for_method(method, grpc_type(handler))
            wrapped = self._handlers[method] = _observed(handler, method, metrics, edge)
        return wrapped


def grpc_type(handler: grpc.RpcMethodHandler) -> str:
    """The method's kind as go-grpc-prometheus names it (``grpc_type``)."""
    streams = (handler.request_streaming, handler.response_streaming)
    return {
        (False, False): "unary",
        (True, False): "client_stream",
        (False, True): "server_stream",
        (True, True): "bidi_stream",
    }[streams]


@dataclasses.dataclass(frozen=True)
class _Edge:
    """How one method's calls are admitted: ``guard`` (None = every caller) checks the
    token and ``role``; a request over ``limit`` bytes is refused unparsed; with
    ``reading`` (the bulk server) every message is read within the caller's share."""

    guard: CallGuard | None
    role: Role
    limit: int
    reading: BulkReading | None

    @property
    def reads_itself(self) -> bool:
        """Admission before the request's bytes are read: the handler takes the raw
        request stream and parses it once admitted (a unary request is one message)."""
        return self.guard is not None or self.reading is not None

    async def admit(self, context: Context) -> _Admission:
        """Check the caller's token and role (nothing is reserved or read yet)."""
        client = await self.guard.admit(context, self.role) if self.guard else None
        return _Admission(self, client, client or peer_host(context.peer()))


def peer_host(peer: str) -> str:
    """``ipv4:10.0.0.7:53122`` -> ``ipv4:10.0.0.7``: an anonymous caller is its host (a
    job's connections share its budget, its ports do not multiply it)."""
    return peer.rpartition(":")[0] or peer


class _Admission:
    """One admitted call: its client (counted by the guard), the caller its budget is
    charged to, and the bytes it holds."""

    __slots__ = ("caller", "client", "edge", "taken")

    def __init__(self, edge: _Edge | None, client: str | None, caller: str) -> None:
        self.edge = edge
        self.client = client
        self.caller = caller
        self.taken = 0

    async def read(self, requests: AsyncIterator[bytes], *, reserve: bool = True) -> bytes | None:
        """The next message (None at the end of the stream). On the bulk server, read
        within the idle time and, with ``reserve``, once what the previous message kept
        is given back and the reserve is held."""
        reading = self.edge.reading if self.edge else None
        if reading is None:
            return await anext(requests, None)
        if reserve:
            self._give(self.taken)
            self.taken = 0
            self.taken = await reading.budget.take(self.caller, reading.reserve)
        try:
            return await asyncio.wait_for(anext(requests, None), reading.idle_s)
        except TimeoutError:
            reading.budget.idle_ends += 1
            raise ResourceExhaustedError(
                f"no whole message within {reading.idle_s:g} s (request_idle_s) while holding "
                "request memory; send each message whole",
                field="request",
            ) from None

    def keep(self, amount: int) -> None:
        """Once a message is read: hold only what it needs of the reservation."""
        if amount < self.taken:
            self._give(self.taken - amount)
            self.taken = amount

    def _give(self, amount: int) -> None:
        if amount and self.edge is not None and self.edge.reading is not None:
            self.edge.reading.budget.give(self.caller, amount)

    def release(self) -> None:
        if self.edge is None:
            return
        if self.edge.guard and self.client:
            self.edge.guard.release(self.client)
        self._give(self.taken)
        self.taken = 0
        self.edge = None


NOT_ADMITTED = _Admission(None, None, "")
"""The admission of a call whose method admits everyone without reading itself."""


def _observed(
    handler: grpc.RpcMethodHandler, method: str, metrics: MethodMetrics, edge: _Edge
) -> grpc.RpcMethodHandler:
    """A handler equivalent to ``handler`` whose calls are admitted at ``edge`` and
    observed. Behaviors are coroutines (unary responses, or streams written with
    ``context.write`` as grpc_health's Watch does) or async generators (streams); for
    those the whole iteration is observed, so errors raised mid-stream are mapped too."""
    behavior = cast(
        Callable[[Any, Context], Any],
        handler.unary_unary
        or handler.unary_stream
        or handler.stream_unary
        or handler.stream_stream,
    )
    parse = _tolerant(handler.request_deserializer, edge.limit)
    checked: Callable[[Any, _Admission], Awaitable[Any]]
    if not edge.reads_itself:
        checked = _checked_stream if handler.request_streaming else _checked
    elif handler.request_streaming:
        checked = functools.partial(_parsed_stream, parse)
    else:
        checked = functools.partial(_parsed_one, parse)

    async def unary_response(request: Any, context: Context) -> Any:
        began = metrics.start()
        fields = CallFields(context, method)
        bind_call_fields(fields)
        admission = NOT_ADMITTED
        try:
            if edge.reads_itself:
                admission = await edge.admit(context)
            response = await behavior(await checked(request, admission), context)
        except BaseException as error:
            await _fail(context, error, fields, metrics, began)
            raise
        finally:
            admission.release()
        metrics.finish(began, context.code() or grpc.StatusCode.OK)
        return response

    async def streaming_response(request: Any, context: Context) -> AsyncIterator[Any]:
        began = metrics.start()
        fields = CallFields(context, method)
        bind_call_fields(fields)
        admission = NOT_ADMITTED
        try:
            if edge.reads_itself:
                admission = await edge.admit(context)
            async for response in behavior(await checked(request, admission), context):
                yield response
        except BaseException as error:
            await _fail(context, error, fields, metrics, began)
            raise
        finally:
            admission.release()
        metrics.finish(began, context.code() or grpc.StatusCode.OK)

    serializers = {
        "request_deserializer": None if edge.reads_itself else parse,
        "response_serializer": handler.response_serializer,
    }
    streams = streaming_response if inspect.isasyncgenfunction(behavior) else unary_response
    request_streaming = handler.request_streaming or edge.reads_itself
    if request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(streams, **serializers)
    if request_streaming:
        return grpc.stream_unary_rpc_method_handler(unary_response, **serializers)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(streams, **serializers)
    return grpc.unary_unary_rpc_method_handler(unary_response, **serializers)


class _Undecodable:
    """What ``_tolerant`` deserializes bytes that are not the method's message into."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _tolerant(deserializer: Callable[[bytes], Any] | None, limit: int) -> Callable[[bytes], Any]:
    """``deserializer`` answering ``_Undecodable`` instead of raising, so the call reaches
    the wrapper, which refuses it with INVALID_ARGUMENT; bytes over ``limit`` are not
    parsed at all."""
    parse = deserializer or _raw

    def deserialize(data: bytes) -> Any:
        if len(data) > limit:
            return _Undecodable(f"is {len(data)} bytes, over this method's limit of {limit} bytes")
        try:
            return parse(data)
        except DecodeError as error:
            return _Undecodable(f"not a valid message: {error}")

    return deserialize


def _raw(data: bytes) -> bytes:
    return data


def _refused(request: Any) -> Any:
    if isinstance(request, _Undecodable):
        raise InvalidArgumentError(request.reason, field="request")
    return request


async def _checked(request: Any, admission: _Admission) -> Any:
    return _refused(request)


async def _checked_stream(
    requests: AsyncIterator[Any], admission: _Admission
) -> AsyncIterator[Any]:
    return (_refused(request) async for request in requests)


async def _parsed_one(
    parse: Callable[[bytes], Any], requests: AsyncIterator[bytes], admission: _Admission
) -> Any:
    """The one message of a unary request, read only now (after admission), and the end
    of the request stream (a call left with its stream unread holds memory in gRPC)."""
    data = await admission.read(requests)
    if data is None:
        raise InvalidArgumentError("no request message", field="request")
    if await admission.read(requests, reserve=False) is not None:
        raise InvalidArgumentError("must be one message", field="request")
    admission.keep(PARSED_FACTOR * len(data))
    return _refused(parse(data))


async def _parsed_stream(
    parse: Callable[[bytes], Any], requests: AsyncIterator[bytes], admission: _Admission
) -> AsyncIterator[Any]:
    async def messages() -> AsyncIterator[Any]:
        while (data := await admission.read(requests)) is not None:
            admission.keep(PARSED_FACTOR * len(data))
            yield _refused(parse(data))

    return messages()


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
        if isinstance(error, NotOwnerError):
            metrics.redirects += 1
            log.debug("owner redirect", owner=error.owner)
        elif isinstance(error, PermissionDeniedError):
            DENIED_CALLS.add(context.peer(), str(error), call_client_name())
        else:
            log.info("request failed", code=code.name, error=str(error))
        traceback.clear_frames(error.__traceback__)
        await context.abort(code, str(error), trailing_metadata=error_metadata(error))
    metrics.finish(began, grpc.StatusCode.INTERNAL)
    log.exception("unexpected error")
    await context.abort(
        grpc.StatusCode.INTERNAL,
        f"internal error (request_id={fields.request_id}): {type(error).__name__}",
    )
