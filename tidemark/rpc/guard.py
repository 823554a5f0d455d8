"""Run every RPC of an asyncio handler inside an async context manager.

Server interceptors only see the handler, not the call; to observe a call (errors,
latency) an interceptor must rebuild the handler around the servicer's behavior. For
streaming responses the guard spans the whole iteration, so errors raised mid-stream are
seen too. Interceptors cache the rebuilt handler per method: ``intercept_service`` runs
for every call, and rebuilding there would cost more than the call itself.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, cast

import grpc

Guard = Callable[[grpc.aio.ServicerContext[Any, Any]], AbstractAsyncContextManager[None]]
Continuation = Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]]


def guard_handler(handler: grpc.RpcMethodHandler, guard: Guard) -> grpc.RpcMethodHandler:
    """A handler equivalent to ``handler`` whose calls run inside ``guard(context)``.
    Behaviors must be coroutines (unary responses) or async generators (streams)."""
    behavior = cast(
        Callable[[Any, grpc.aio.ServicerContext[Any, Any]], Any],
        handler.unary_unary
        or handler.unary_stream
        or handler.stream_unary
        or handler.stream_stream,
    )

    async def unary_response(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        async with guard(context):
            return await behavior(request, context)

    async def streaming_response(
        request: Any, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[Any]:
        async with guard(context):
            async for response in behavior(request, context):
                yield response

    serializers = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(streaming_response, **serializers)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(unary_response, **serializers)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(streaming_response, **serializers)
    return grpc.unary_unary_rpc_method_handler(unary_response, **serializers)


class GuardingInterceptor(grpc.aio.ServerInterceptor):
    """Wraps each method's handler in ``guard_for(method)`` once, then reuses it."""

    def __init__(self) -> None:
        self._handlers: dict[str, grpc.RpcMethodHandler] = {}

    @abc.abstractmethod
    def guard_for(self, method: str) -> Guard:
        """The guard of every call of ``method`` (the full ``/package.Service/Method``)."""

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        method: str = handler_call_details.method
        wrapped = self._handlers.get(method)
        if wrapped is None:
            handler = await continuation(handler_call_details)
            if handler is None:
                return handler  # unknown method: not cached, callers choose these names
            wrapped = self._handlers[method] = guard_handler(handler, self.guard_for(method))
        return wrapped


def current_code(context: grpc.aio.ServicerContext[Any, Any]) -> grpc.StatusCode | None:
    """The status the servicer set or aborted with so far (None = not set)."""
    return context.code()
