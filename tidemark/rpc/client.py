"""Client side of every Tidemark service: lazy per-process channels and retries.

Channels are created on first use in the process that uses them (PySpark forks its
workers, and a gRPC channel does not survive fork), cached by (pid, address, tls, config), and
never pickled. ``call`` puts a deadline on every RPC, retries only what is safe to
retry, and turns the final gRPC error back into the server's ``tidemark.errors``
exception.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

import grpc
import structlog
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_random_exponential,
)

from tidemark.config import ClientConfig
from tidemark.errors import TidemarkError
from tidemark.rpc.options import client_options
from tidemark.rpc.status import REQUEST_ID_KEY, error_from_status

log = structlog.get_logger(__name__)

S = TypeVar("S")
R = TypeVar("R")

ALWAYS_RETRIED = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED})

_channels: dict[tuple[int, str, bool, ClientConfig | None], grpc.Channel] = {}
_channels_lock = threading.Lock()


def channel_for(
    address: str, *, tls: bool = False, config: ClientConfig | None = None
) -> grpc.Channel:
    """A new channel with the keepalive and message limits the server expects.

    ``tls`` trusts ``config.tls_ca_path`` if set, else the system roots.
    """
    settings = config or ClientConfig()
    options = client_options(
        max_message_bytes=settings.max_message_bytes,
        keepalive_time_ms=settings.keepalive_time_ms,
        keepalive_timeout_ms=settings.keepalive_timeout_ms,
    )
    if tls:
        roots = Path(settings.tls_ca_path).read_bytes() if settings.tls_ca_path else None
        credentials = grpc.ssl_channel_credentials(root_certificates=roots)
        return grpc.secure_channel(address, credentials, options=options)
    return grpc.insecure_channel(address, options=options)


def shared_channel(
    address: str, *, tls: bool = False, config: ClientConfig | None = None
) -> grpc.Channel:
    """This process's channel to ``address``; a forked child gets its own."""
    key = (os.getpid(), address, tls, config)
    with _channels_lock:
        channel = _channels.get(key)
        if channel is None:
            channel = _channels[key] = channel_for(address, tls=tls, config=config)
        return channel


class LazyStub(Generic[S]):
    """A picklable handle to a stub: only the address travels, the channel is per process."""

    def __init__(
        self,
        address: str,
        stub_class: Callable[[grpc.Channel], S],
        *,
        tls: bool = False,
        config: ClientConfig | None = None,
    ) -> None:
        self.address = address
        self.stub_class = stub_class
        self.tls = tls
        self.config = config or ClientConfig()
        self._stub: tuple[int, S] | None = None

    @property
    def stub(self) -> S:
        pid = os.getpid()
        if self._stub is None or self._stub[0] != pid:
            channel = shared_channel(self.address, tls=self.tls, config=self.config)
            self._stub = (pid, self.stub_class(channel))
        return self._stub[1]

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_stub"] = None
        return state


def lazy_stub(
    address: str,
    stub_class: Callable[[grpc.Channel], S],
    *,
    tls: bool = False,
    config: ClientConfig | None = None,
) -> LazyStub[S]:
    return LazyStub(address, stub_class, tls=tls, config=config)


def is_retryable(error: BaseException, *, idempotent: bool) -> bool:
    """UNAVAILABLE and RESOURCE_EXHAUSTED always; DEADLINE_EXCEEDED only if repeating is safe."""
    if not isinstance(error, grpc.Call):
        return False
    code = error.code()
    return code in ALWAYS_RETRIED or (idempotent and code == grpc.StatusCode.DEADLINE_EXCEEDED)


def call(
    method: Callable[..., R],
    request: Any,
    *,
    idempotent: bool,
    timeout: float | None = None,
    config: ClientConfig | None = None,
    request_id: str | None = None,
) -> R:
    """Invoke ``method(request, timeout=..., metadata=...)`` with retries.

    ``method`` is a unary stub method (or any callable with that signature). Every
    attempt carries the same ``x-request-id`` so the server can recognise repeats.
    Raises the ``tidemark.errors`` exception matching the final status.
    """
    settings = config or ClientConfig()
    deadline = settings.timeout_s if timeout is None else timeout
    metadata = ((REQUEST_ID_KEY, request_id or uuid.uuid4().hex),)
    retrying = Retrying(
        stop=stop_after_attempt(settings.max_attempts) | stop_after_delay(settings.max_total_s),
        wait=wait_random_exponential(
            multiplier=settings.initial_backoff_s, max=settings.max_backoff_s
        ),
        retry=retry_if_exception(lambda error: is_retryable(error, idempotent=idempotent)),
        before_sleep=_log_retry,
        reraise=True,
    )
    try:
        return retrying(method, request, timeout=deadline, metadata=metadata)
    except grpc.RpcError as error:
        raise to_domain_error(error) from error


def to_domain_error(error: grpc.RpcError) -> TidemarkError:
    """The ``tidemark.errors`` exception for a failed call, keeping the server's message."""
    if not isinstance(error, grpc.Call):
        return TidemarkError(str(error))
    return error_from_status(error.code(), error.details() or "", error.trailing_metadata() or ())


def _log_retry(state: RetryCallState) -> None:
    error = state.outcome.exception() if state.outcome else None
    code = error.code().name if isinstance(error, grpc.Call) else None
    log.warning("retrying rpc", attempt=state.attempt_number, code=code)
