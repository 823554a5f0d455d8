"""The error interceptor maps domain errors to status codes, through a real server."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import grpc
import pytest
import structlog

from tidemark import errors
from tidemark.logs import configure_logging
from tidemark.rpc.status import (
    ERROR_CLASS_KEY,
    ERROR_FIELD_KEY,
    OWNER_KEY,
    REQUEST_ID_KEY,
    error_from_status,
    error_metadata,
)

from .probe import Unary


def trailing_metadata(error: grpc.RpcError) -> dict[str, str]:
    """At runtime the items are (key, value) tuples; the stubs describe another type."""
    items: Any = error.trailing_metadata()
    return dict(items)


@pytest.mark.parametrize(
    ("error_class", "code"),
    [
        ("InvalidArgumentError", grpc.StatusCode.INVALID_ARGUMENT),
        ("FailedPreconditionError", grpc.StatusCode.FAILED_PRECONDITION),
        ("ConflictError", grpc.StatusCode.FAILED_PRECONDITION),
        ("NotOwnerError", grpc.StatusCode.FAILED_PRECONDITION),
        ("NotFoundError", grpc.StatusCode.NOT_FOUND),
        ("AlreadyExistsError", grpc.StatusCode.ALREADY_EXISTS),
        ("ResourceExhaustedError", grpc.StatusCode.RESOURCE_EXHAUSTED),
        ("UnavailableError", grpc.StatusCode.UNAVAILABLE),
    ],
)
def test_domain_errors_map_to_status_codes(
    unary: Unary, error_class: str, code: grpc.StatusCode
) -> None:
    with pytest.raises(grpc.RpcError) as raised:
        unary("Fail")(error_class.encode(), timeout=10)
    assert raised.value.code() == code
    assert raised.value.details() == "thing: bad thing"
    metadata = trailing_metadata(raised.value)
    assert metadata[ERROR_CLASS_KEY] == error_class
    assert metadata[ERROR_FIELD_KEY] == "thing"


def test_unexpected_exception_is_internal_with_request_id(unary: Unary) -> None:
    with pytest.raises(grpc.RpcError) as raised:
        unary("Crash")(b"", timeout=10, metadata=((REQUEST_ID_KEY, "req-42"),))
    assert raised.value.code() == grpc.StatusCode.INTERNAL
    details = raised.value.details() or ""
    assert "req-42" in details
    assert "boom" not in details


def test_unexpected_exception_is_logged_with_traceback_and_request_id(
    restore_logging: None, capsys: pytest.CaptureFixture[str], unary: Unary
) -> None:
    configure_logging(json=True)
    with pytest.raises(grpc.RpcError):
        unary("Crash")(b"", timeout=10, metadata=((REQUEST_ID_KEY, "req-7"),))
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    (logged,) = [line for line in lines if line["event"] == "unexpected error"]
    assert logged["request_id"] == "req-7"
    assert logged["method"].endswith("/Crash")
    assert "RuntimeError: boom" in logged["exception"]


def test_unmapped_domain_error_is_internal(unary: Unary) -> None:
    with pytest.raises(grpc.RpcError) as raised:
        unary("Fail")(b"ConfigError", timeout=10)
    assert raised.value.code() == grpc.StatusCode.INTERNAL


def test_explicit_abort_keeps_its_status(unary: Unary) -> None:
    with pytest.raises(grpc.RpcError) as raised:
        unary("Abort")(b"", timeout=10)
    assert raised.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert raised.value.details() == "not you"


def test_error_raised_mid_stream_is_mapped(
    channel: grpc.Channel, method_path: Callable[[str], str]
) -> None:
    responses = channel.unary_stream(method_path("Stream"), None, None)(b"", timeout=10)
    received: list[bytes] = []
    with pytest.raises(grpc.RpcError) as raised:
        received.extend(responses)
    assert received == [b"a", b"b"]
    assert raised.value.code() == grpc.StatusCode.NOT_FOUND
    assert raised.value.details() == "thing: gone"


def test_success_passes_through(unary: Unary) -> None:
    assert unary("Echo")(b"hello", timeout=10) == b"hello"


def test_log_lines_of_a_call_carry_its_request_id_and_method(
    restore_logging: None, capsys: pytest.CaptureFixture[str], unary: Unary
) -> None:
    configure_logging(json=True)
    for metadata in (((REQUEST_ID_KEY, "req-a"),), None, None):
        with pytest.raises(grpc.RpcError):
            unary("Fail")(b"NotFoundError", timeout=10, metadata=metadata)
    structlog.get_logger("tidemark.test").info("outside any call")
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    failed = [line for line in lines if line["event"] == "request failed"]
    assert len(failed) == 3
    assert failed[0]["request_id"] == "req-a"
    generated = {line["request_id"] for line in failed[1:]}
    assert len(generated) == 2
    assert "req-a" not in generated
    assert all(line["method"].endswith("/Fail") for line in failed)
    (outside,) = [line for line in lines if line["event"] == "outside any call"]
    assert "request_id" not in outside
    assert "method" not in outside


def test_a_not_owner_error_carries_the_owner_to_the_client() -> None:
    """The owner's address rides in trailing metadata and is rebuilt on the client."""
    sent = errors.NotOwnerError("owned elsewhere", field="instant_time", owner="pod-1.m:50051")
    metadata = error_metadata(sent)
    assert (OWNER_KEY, "pod-1.m:50051") in metadata

    rebuilt = error_from_status(grpc.StatusCode.FAILED_PRECONDITION, str(sent), metadata)

    assert isinstance(rebuilt, errors.NotOwnerError)
    assert (rebuilt.owner, rebuilt.field, rebuilt.message) == (
        "pod-1.m:50051",
        "instant_time",
        "owned elsewhere",
    )
