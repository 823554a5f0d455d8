"""Run every RPC of a handler inside a context manager, whatever its streaming shape.

Server interceptors only see the handler, not the call; to observe a call (errors,
latency) an interceptor must rebuild the handler around the servicer's behavior. For
streaming responses the guard spans the whole iteration, so errors raised mid-stream are
seen too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any, cast

import grpc

Guard = Callable[[grpc.ServicerContext], AbstractContextManager[None]]


def guard_handler(handler: grpc.RpcMethodHandler, guard: Guard) -> grpc.RpcMethodHandler:
    """A handler equivalent to ``handler`` whose calls run inside ``guard(context)``."""
    behavior = cast(
        Callable[[Any, grpc.ServicerContext], Any],
        handler.unary_unary
        or handler.unary_stream
        or handler.stream_unary
        or handler.stream_stream,
    )

    def unary_response(request: Any, context: grpc.ServicerContext) -> Any:
        with guard(context):
            return behavior(request, context)

    def streaming_response(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        with guard(context):
            yield from behavior(request, context)

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


def current_code(context: grpc.ServicerContext) -> grpc.StatusCode | None:
    """The status the servicer set or aborted with so far (None = not set)."""
    code: grpc.StatusCode | None = context.code()  # type: ignore[attr-defined]  # stubs predate code()
    return code
