"""A tiny raw-bytes test service (no protos): each method exercises one runtime behavior."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from tidemark import errors
from tidemark.rpc.registry import ServiceContext

SERVICE = "tidemark.test.v1.TestService"

Context = grpc.aio.ServicerContext[Any, Any]
Unary = Callable[[str], grpc.UnaryUnaryMultiCallable]
"""Type of the ``unary`` fixture: method name -> raw-bytes callable."""


class ProbeServicer:
    """Each method exercises one runtime behavior; ``calls`` counts attempts per method."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.slow_started = threading.Event()
        self.release = threading.Event()
        self.closed = False
        self._lock = threading.Lock()

    def _count(self, method: str) -> int:
        with self._lock:
            self.calls[method] += 1
            return self.calls[method]

    async def echo(self, request: bytes, context: Context) -> bytes:
        self._count("Echo")
        return request

    async def fail(self, request: bytes, context: Context) -> bytes:
        """Raises the ``tidemark.errors`` class named by the request."""
        self._count("Fail")
        raise getattr(errors, request.decode())("bad thing", field="thing")

    async def crash(self, request: bytes, context: Context) -> bytes:
        self._count("Crash")
        raise RuntimeError("boom")

    async def abort(self, request: bytes, context: Context) -> bytes:
        self._count("Abort")
        await context.abort(grpc.StatusCode.PERMISSION_DENIED, "not you")

    async def flaky(self, request: bytes, context: Context) -> bytes:
        """Fails UNAVAILABLE for the first ``int(request)`` calls, then succeeds."""
        if self._count("Flaky") <= int(request):
            raise errors.UnavailableError("try later", field="peer")
        return b"ok"

    async def cancelled(self, request: bytes, context: Context) -> bytes:
        """Answers CANCELLED (as a server shutting down does) for the first call only."""
        if self._count("Cancelled") == 1:
            await context.abort(grpc.StatusCode.CANCELLED, "server shutting down")
        return b"ok"

    async def slow(self, request: bytes, context: Context) -> bytes:
        """Waits (off the event loop) until the test sets ``release``."""
        self._count("Slow")
        self.slow_started.set()
        await asyncio.to_thread(self.release.wait, 60)
        return b"done"

    async def stream(self, request: bytes, context: Context) -> AsyncIterator[bytes]:
        self._count("Stream")
        yield b"a"
        yield b"b"
        raise errors.NotFoundError("gone", field="thing")

    def close(self) -> None:
        self.closed = True

    def add_to_server(self, server: grpc.aio.Server, context: ServiceContext) -> ProbeServicer:
        unary = {
            "Echo": self.echo,
            "Fail": self.fail,
            "Crash": self.crash,
            "Abort": self.abort,
            "Flaky": self.flaky,
            "Slow": self.slow,
            "Cancelled": self.cancelled,
        }
        handlers = {name: grpc.unary_unary_rpc_method_handler(fn) for name, fn in unary.items()}
        handlers["Stream"] = grpc.unary_stream_rpc_method_handler(self.stream)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
        return self
