"""Client runtime against a real server: retries, deadlines, domain errors, lazy stubs."""

from __future__ import annotations

import pickle
from collections.abc import Callable

import grpc
import pytest

from tidemark import errors
from tidemark.config import ClientConfig, ServerConfig
from tidemark.rpc.client import LazyStub, call, channel_for, lazy_stub, shared_channel
from tidemark.rpc.registry import ServiceDefinition
from tidemark.rpc.server import RunningServer, build_server

from .probe import SERVICE, ProbeServicer, Unary

FAST_RETRIES = ClientConfig(initial_backoff_s=0.01, max_backoff_s=0.05, max_attempts=4)


def test_unavailable_is_retried_until_success(servicer: ProbeServicer, unary: Unary) -> None:
    assert call(unary("Flaky"), b"2", idempotent=False, config=FAST_RETRIES) == b"ok"
    assert servicer.calls["Flaky"] == 3


def test_retries_stop_at_max_attempts_and_raise_domain_error(
    servicer: ProbeServicer, unary: Unary
) -> None:
    with pytest.raises(errors.UnavailableError) as raised:
        call(unary("Flaky"), b"10", idempotent=True, config=FAST_RETRIES)
    assert servicer.calls["Flaky"] == FAST_RETRIES.max_attempts
    assert raised.value.field == "peer"
    assert raised.value.message == "try later"


@pytest.mark.parametrize(
    "error_class",
    [
        errors.InvalidArgumentError,
        errors.FailedPreconditionError,
        errors.ConflictError,
        errors.NotFoundError,
        errors.AlreadyExistsError,
    ],
)
def test_non_retryable_errors_are_called_once_and_keep_their_class(
    servicer: ProbeServicer, unary: Unary, error_class: type[errors.TidemarkError]
) -> None:
    with pytest.raises(error_class) as raised:
        call(unary("Fail"), error_class.__name__.encode(), idempotent=True, config=FAST_RETRIES)
    assert type(raised.value) is error_class
    assert raised.value.field == "thing"
    assert str(raised.value) == "thing: bad thing"
    assert servicer.calls["Fail"] == 1


def test_resource_exhausted_is_retried(servicer: ProbeServicer, unary: Unary) -> None:
    with pytest.raises(errors.ResourceExhaustedError):
        call(unary("Fail"), b"ResourceExhaustedError", idempotent=False, config=FAST_RETRIES)
    assert servicer.calls["Fail"] == FAST_RETRIES.max_attempts


def test_internal_is_not_retried(servicer: ProbeServicer, unary: Unary) -> None:
    with pytest.raises(errors.TidemarkError) as raised:
        call(unary("Crash"), b"", idempotent=True, config=FAST_RETRIES)
    assert "INTERNAL" in str(raised.value)
    assert servicer.calls["Crash"] == 1


@pytest.mark.parametrize(("idempotent", "attempts"), [(False, 1), (True, 2)])
def test_deadline_exceeded_is_retried_only_when_idempotent(
    servicer: ProbeServicer, unary: Unary, idempotent: bool, attempts: int
) -> None:
    config = ClientConfig(initial_backoff_s=0.01, max_backoff_s=0.01, max_attempts=2, timeout_s=0.2)
    with pytest.raises(errors.UnavailableError):
        call(unary("Slow"), b"", idempotent=idempotent, config=config)
    servicer.release.set()
    assert servicer.calls["Slow"] == attempts


def test_cancelled_by_the_server_is_retried_only_when_idempotent(
    servicer: ProbeServicer, unary: Unary
) -> None:
    assert call(unary("Cancelled"), b"", idempotent=True, config=FAST_RETRIES) == b"ok"
    assert servicer.calls["Cancelled"] == 2
    servicer.calls.clear()
    with pytest.raises(errors.TidemarkError, match="CANCELLED"):
        call(unary("Cancelled"), b"", idempotent=False, config=FAST_RETRIES)
    assert servicer.calls["Cancelled"] == 1


def test_request_id_is_sent_with_every_attempt(unary: Unary) -> None:
    with pytest.raises(errors.TidemarkError) as raised:
        call(unary("Crash"), b"", idempotent=True, request_id="abc123")
    assert "abc123" in str(raised.value)


def test_shared_channel_is_cached_per_process_and_address(server: RunningServer) -> None:
    address = f"127.0.0.1:{server.port}"
    assert shared_channel(address) is shared_channel(address)
    assert shared_channel(address) is not shared_channel(f"localhost:{server.port}")


def test_lazy_stub_pickles_without_its_channel(server: RunningServer) -> None:
    stub = lazy_stub(f"127.0.0.1:{server.port}", RawEcho)
    assert stub.stub.echo(b"one", timeout=10) == b"one"
    copy: LazyStub[RawEcho] = pickle.loads(pickle.dumps(stub))
    assert copy.__dict__["_stub"] is None
    assert copy.stub.echo(b"two", timeout=10) == b"two"


class RawEcho:
    """Shaped like a generated stub: constructed from a channel, one attribute per method."""

    def __init__(self, channel: grpc.Channel) -> None:
        self.echo = channel.unary_unary(f"/{SERVICE}/Echo", None, None)


def test_channel_for_uses_matching_message_limit(
    server: RunningServer, method_path: Callable[[str], str]
) -> None:
    small = ClientConfig(max_message_bytes=1024)
    with channel_for(f"127.0.0.1:{server.port}", config=small) as channel:
        echo = channel.unary_unary(method_path("Echo"), None, None)
        assert echo(b"x" * 100, timeout=10) == b"x" * 100
        with pytest.raises(grpc.RpcError) as raised:
            echo(b"x" * 4096, timeout=10)
    assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_a_server_bound_to_a_port_a_cached_channel_last_failed_on_answers_at_once(
    definition: ServiceDefinition,
) -> None:
    """A channel cached for a server that has gone sits in reconnect backoff, failing
    calls at once; a later server of this process on the same port must not inherit
    that: the fencing test's next write started its embedded service on the port a dead
    writer's service had used and found it "unreachable"."""
    once = ClientConfig(max_attempts=1, timeout_s=2.0)
    first = build_server(ServerConfig(port=0, metrics_port=0), [definition])
    address = f"127.0.0.1:{first.port}"
    assert (
        call(lazy_stub(address, RawEcho, config=once).stub.echo, b"a", idempotent=True, config=once)
        == b"a"
    )
    first.stop(0)
    with pytest.raises(errors.UnavailableError):
        call(lazy_stub(address, RawEcho, config=once).stub.echo, b"b", idempotent=True, config=once)
    second = build_server(ServerConfig(port=first.port, metrics_port=0), [definition])
    try:
        stub = lazy_stub(address, RawEcho, config=once)
        assert call(stub.stub.echo, b"c", idempotent=True, config=once) == b"c"
    finally:
        second.stop(0)
