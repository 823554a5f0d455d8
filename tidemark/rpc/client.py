"""Client side of every Tidemark service: lazy per-process channels and retries.

Channels are created on first use in the process that uses them (PySpark forks its
workers, and a gRPC channel does not survive fork), cached by (pid, address, config), and
never pickled. A config with ``tls_ca_path`` dials TLS (presenting its client certificate
for mutual TLS when it has one); a config with a token sends it on every call as
``authorization: Bearer``, the token file re-read when it changes. ``call`` puts a
deadline on every RPC, retries only what is safe to retry, and turns the final gRPC
error back into the server's ``tidemark.errors`` exception. ``ServiceClient`` bundles
both for one service's clients (``tidemark.clients``): a service still unreachable after
the retries is one error naming it and its address.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

import grpc
import structlog
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tenacity import RetryCallState

from tidemark.config import ClientConfig
from tidemark.errors import TidemarkError, UnavailableError
from tidemark.rpc.options import client_options
from tidemark.rpc.routes import RoutedChannel
from tidemark.rpc.status import ERROR_CLASS_KEY, REQUEST_ID_KEY, error_from_status, retry_after_s

log = structlog.get_logger(__name__)

S = TypeVar("S")
R = TypeVar("R")

ALWAYS_RETRIED = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED})
RETRIED_IF_IDEMPOTENT = frozenset({grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED})

AUTHORIZATION_KEY = "authorization"

_channels: dict[tuple[int, str, ClientConfig | None], grpc.Channel] = {}
_channels_lock = threading.Lock()


@atexit.register
def _close_channels() -> None:
    """Close this process's channels before the interpreter tears down, so gRPC's own
    threads stop in order (a channel left open can abort the exit in C++)."""
    close_channels(lambda _: True)


def close_channels(matching: Callable[[str], bool]) -> None:
    """Close and forget this process's channels to the addresses ``matching`` accepts: a
    cached channel to a stopped server may sit in reconnect backoff, failing calls fast,
    when a later server of this process gets the same loopback port."""
    with _channels_lock:
        for key in [key for key in _channels if matching(key[1])]:
            _channels.pop(key).close()


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def forget_loopback_channels(port: int) -> None:
    """Drop from this process's cache, without closing them, the channels to ``port`` on
    loopback: a server of this process has just bound that port, so they dialed an earlier
    server there (another process's, since gone) and may sit in reconnect backoff, failing
    every call at once with "Connection refused" although the new server listens. Stubs
    already holding one keep it; new ones get a fresh channel."""
    names = {f"{host}:{port}" for host in LOOPBACK_HOSTS}
    with _channels_lock:
        for key in [key for key in _channels if key[1] in names]:
            del _channels[key]


_tokens: dict[str, tuple[tuple[int, int], str]] = {}
_embedded: set[str] = set()


def set_embedded(address: str, embedded: bool) -> None:
    """Record that a service embedded in this process listens at ``address`` (or no
    longer does)."""
    if embedded:
        _embedded.add(address)
    else:
        _embedded.discard(address)


def config_for(address: str, config: ClientConfig | None = None) -> ClientConfig:
    """``config`` (default: the env's) for dialing ``address``: without TLS and token when
    it is a service embedded in this process (plaintext loopback, no token checked)."""
    settings = config or ClientConfig.from_env()
    return settings.without_credentials() if address in _embedded else settings


def channel_for(address: str, *, config: ClientConfig | None = None) -> RoutedChannel:
    """A new channel to the service at ``address``, each call sent to the port serving
    its method there (``RoutedChannel``)."""
    settings = config or ClientConfig()
    return RoutedChannel(address, lambda target: _open_channel(target, settings))


def _open_channel(address: str, settings: ClientConfig) -> grpc.Channel:
    """A channel with the keepalive and message limits the server expects; TLS
    trusting ``config.tls_ca_path`` when it is set, with the client certificate if any.
    The files are read when the channel is made: a renewed client certificate is used
    by the channels of processes started after the renewal."""
    options = client_options(
        target=address,
        max_message_bytes=settings.max_message_bytes,
        keepalive_time_ms=settings.keepalive_time_ms,
        keepalive_timeout_ms=settings.keepalive_timeout_ms,
    )
    if settings.tls_ca_path is None:
        return grpc.insecure_channel(address, options=options)
    credentials = grpc.ssl_channel_credentials(
        root_certificates=Path(settings.tls_ca_path).read_bytes(),
        private_key=_read_optional(settings.tls_key_path),
        certificate_chain=_read_optional(settings.tls_cert_path),
    )
    return grpc.secure_channel(address, credentials, options=options)


def _read_optional(path: str | None) -> bytes | None:
    return None if path is None else Path(path).read_bytes()


def shared_channel(address: str, *, config: ClientConfig | None = None) -> grpc.Channel:
    """This process's channel to ``address``; a forked child gets its own."""
    key = (os.getpid(), address, config)
    with _channels_lock:
        channel = _channels.get(key)
        if channel is None:
            channel = _channels[key] = channel_for(address, config=config)
        return channel


def bearer_token(config: ClientConfig) -> str | None:
    """The token to send: ``token_file``'s first line (re-read when the file's mtime or
    size changes, so a rotated token is used by the next call), else ``token``."""
    if config.token_file is None:
        return config.token
    stat = Path(config.token_file).stat()
    version = (stat.st_mtime_ns, stat.st_size)
    cached = _tokens.get(config.token_file)
    if cached is None or cached[0] != version:
        lines = Path(config.token_file).read_text().split()
        cached = _tokens[config.token_file] = (version, lines[0] if lines else "")
    return cached[1]


def call_metadata(config: ClientConfig, request_id: str) -> tuple[tuple[str, str], ...]:
    """The request id, and the bearer token when the config has one."""
    token = bearer_token(config)
    if not token:
        return ((REQUEST_ID_KEY, request_id),)
    return ((REQUEST_ID_KEY, request_id), (AUTHORIZATION_KEY, f"Bearer {token}"))


class LazyStub(Generic[S]):
    """A picklable handle to a stub: only the address travels, the channel is per process."""

    def __init__(
        self,
        address: str,
        stub_class: Callable[[grpc.Channel], S],
        *,
        config: ClientConfig | None = None,
    ) -> None:
        self.address = address
        self.stub_class = stub_class
        self.config = config or ClientConfig()
        self._stub: tuple[int, S] | None = None

    @property
    def stub(self) -> S:
        pid = os.getpid()
        if self._stub is None or self._stub[0] != pid:
            channel = shared_channel(self.address, config=self.config)
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
    config: ClientConfig | None = None,
) -> LazyStub[S]:
    return LazyStub(address, stub_class, config=config)


def is_retryable(error: BaseException, *, idempotent: bool) -> bool:
    """UNAVAILABLE and RESOURCE_EXHAUSTED always; DEADLINE_EXCEEDED and CANCELLED only if
    repeating is safe. These clients never cancel a call, so a CANCELLED answer comes
    from the server side: a replica shutting down cancels the calls it had received but
    not yet started."""
    if not isinstance(error, grpc.Call):
        return False
    code = error.code()
    return code in ALWAYS_RETRIED or (idempotent and code in RETRIED_IF_IDEMPOTENT)


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
    attempt carries the same ``x-request-id`` so the server can recognise repeats, and
    waits at least the retry hint a RESOURCE_EXHAUSTED answer carries.
    Raises the ``tidemark.errors`` exception matching the final status.
    """
    settings = config or ClientConfig()
    deadline = settings.timeout_s if timeout is None else timeout
    metadata = call_metadata(settings, request_id or uuid.uuid4().hex)
    retrying = settings.retry_policy.retrying(
        lambda error: is_retryable(error, idempotent=idempotent),
        hint_s=server_hint_s,
        before_sleep=_log_retry,
    )
    try:
        return retrying(method, request, timeout=deadline, metadata=metadata)
    except grpc.RpcError as error:
        raise to_domain_error(error) from error


def sent_by_server(error: BaseException | None) -> bool:
    """Whether a server raised ``error`` (its class rides in the trailing metadata), not
    the transport (no connection, a deadline)."""
    cause = error.__cause__ if error is not None else None
    if not isinstance(cause, grpc.Call):
        return False
    return any(key == ERROR_CLASS_KEY for key, _ in cause.trailing_metadata() or ())


def to_domain_error(error: grpc.RpcError) -> TidemarkError:
    """The ``tidemark.errors`` exception for a failed call, keeping the server's message."""
    if not isinstance(error, grpc.Call):
        return TidemarkError(str(error))
    return error_from_status(error.code(), error.details() or "", error.trailing_metadata() or ())


def server_hint_s(error: BaseException | None) -> float:
    """The retry hint of a failed call (0 when the server gave none, or no call failed)."""
    if not isinstance(error, grpc.Call):
        return 0.0
    return retry_after_s(error.trailing_metadata() or ())


def _log_retry(state: RetryCallState) -> None:
    error = state.outcome.exception() if state.outcome else None
    code = error.code().name if isinstance(error, grpc.Call) else None
    log.warning("retrying rpc", attempt=state.attempt_number, code=code)


@dataclasses.dataclass(frozen=True)
class ServiceName:
    """A service as its clients name it: the gRPC name its health check answers for, the
    words of an error (``marker service``) and the setting holding its address."""

    full_name: str
    label: str
    address_field: str

    def unreachable(self, address: str, error: UnavailableError) -> UnavailableError:
        """The error a caller reports when the service stays unavailable after retries."""
        return UnavailableError(
            f"{self.label} at {address} is unreachable: {error.message}",
            field=self.address_field,
        )


class ServiceClient(Generic[S]):
    """One service's stub at an address (picklable, channel per process) whose calls are
    retried and whose final unavailability names the service."""

    def __init__(
        self,
        service: ServiceName,
        address: str,
        stub_class: Callable[[grpc.Channel], S],
        config: ClientConfig | None = None,
    ) -> None:
        self.service = service
        self.config = config_for(address, config)
        self._stub: LazyStub[S] = lazy_stub(address, stub_class, config=self.config)

    @property
    def address(self) -> str:
        return self._stub.address

    @property
    def stub(self) -> S:
        return self._stub.stub

    def call(
        self,
        method: Callable[..., R],
        request: Any,
        *,
        idempotent: bool = True,
        timeout: float | None = None,
    ) -> R:
        """``call`` with this client's settings; UNAVAILABLE after the retries names the
        service and its address."""
        try:
            return call(method, request, idempotent=idempotent, timeout=timeout, config=self.config)
        except UnavailableError as error:
            if sent_by_server(error):  # the service answered: what it depends on failed
                raise UnavailableError(
                    f"{self.service.label} at {self.address} answered: {error.message}",
                    field=error.field,
                ) from error
            raise self.service.unreachable(self.address, error) from error

    def check_reachable(self) -> None:
        """Ask the service's health endpoint (before a job creates anything): unreachable
        or not serving is an UnavailableError naming the service."""
        health = lazy_stub(self.address, health_pb2_grpc.HealthStub, config=self.config)
        request = health_pb2.HealthCheckRequest(service=self.service.full_name)
        try:
            response = call(health.stub.Check, request, idempotent=True, config=self.config)
        except UnavailableError as error:
            raise self.service.unreachable(self.address, error) from error
        if response.status != health_pb2.HealthCheckResponse.SERVING:
            raise UnavailableError(
                f"{self.service.label} at {self.address} is not serving",
                field=self.service.address_field,
            )
