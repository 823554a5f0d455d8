"""A tiny raw-bytes test service (no protos): each method exercises one runtime behavior."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator

import grpc

from tidemark import errors
from tidemark.rpc.registry import ServiceContext

SERVICE = "tidemark.test.v1.TestService"

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

    def echo(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        self._count("Echo")
        return request

    def fail(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        """Raises the ``tidemark.errors`` class named by the request."""
        self._count("Fail")
        raise getattr(errors, request.decode())("bad thing", field="thing")

    def crash(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        self._count("Crash")
        raise RuntimeError("boom")

    def abort(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        self._count("Abort")
        context.abort(grpc.StatusCode.PERMISSION_DENIED, "not you")

    def flaky(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        """Fails UNAVAILABLE for the first ``int(request)`` calls, then succeeds."""
        if self._count("Flaky") <= int(request):
            raise errors.UnavailableError("try later", field="peer")
        return b"ok"

    def slow(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        """Blocks until the test sets ``release``."""
        self._count("Slow")
        self.slow_started.set()
        self.release.wait(60)
        return b"done"

    def stream(self, request: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
        self._count("Stream")
        yield b"a"
        yield b"b"
        raise errors.NotFoundError("gone", field="thing")

    def close(self) -> None:
        self.closed = True

    def add_to_server(self, server: grpc.Server, context: ServiceContext) -> ProbeServicer:
        unary = {
            "Echo": self.echo,
            "Fail": self.fail,
            "Crash": self.crash,
            "Abort": self.abort,
            "Flaky": self.flaky,
            "Slow": self.slow,
        }
        handlers = {name: grpc.unary_unary_rpc_method_handler(fn) for name, fn in unary.items()}
        handlers["Stream"] = grpc.unary_stream_rpc_method_handler(self.stream)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
        return self
