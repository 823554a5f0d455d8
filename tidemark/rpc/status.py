"""The one mapping between ``tidemark.errors`` classes and gRPC status codes.

The server sends the error class and field in trailing metadata so the client can
rebuild the exact domain error (``ConflictError`` and ``FailedPreconditionError`` share
a status code).
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc

from tidemark import errors

ERROR_CLASS_KEY = "tidemark-error-class"
ERROR_FIELD_KEY = "tidemark-error-field"
REQUEST_ID_KEY = "x-request-id"
RETRY_AFTER_KEY = "tidemark-retry-after-ms"
"""Trailing metadata of a RESOURCE_EXHAUSTED answer: how long the client should wait."""
OWNER_KEY = "tidemark-owner"
"""Trailing metadata of a ``NotOwnerError`` (FAILED_PRECONDITION): the address of the
replica that owns what the call named."""

STATUS_CODES: dict[type[errors.TidemarkError], grpc.StatusCode] = {
    errors.InvalidArgumentError: grpc.StatusCode.INVALID_ARGUMENT,
    errors.FailedPreconditionError: grpc.StatusCode.FAILED_PRECONDITION,
    errors.ConflictError: grpc.StatusCode.FAILED_PRECONDITION,
    errors.NotOwnerError: grpc.StatusCode.FAILED_PRECONDITION,
    errors.PermissionDeniedError: grpc.StatusCode.PERMISSION_DENIED,
    errors.UnauthenticatedError: grpc.StatusCode.UNAUTHENTICATED,
    errors.NotFoundError: grpc.StatusCode.NOT_FOUND,
    errors.AlreadyExistsError: grpc.StatusCode.ALREADY_EXISTS,
    errors.ResourceExhaustedError: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.UnavailableError: grpc.StatusCode.UNAVAILABLE,
    errors.DataLossError: grpc.StatusCode.DATA_LOSS,
}

_CLASSES_BY_NAME: dict[str, type[errors.TidemarkError]] = {
    cls.__name__: cls for cls in STATUS_CODES
}

_CLASSES_BY_CODE: dict[grpc.StatusCode, type[errors.TidemarkError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: errors.InvalidArgumentError,
    grpc.StatusCode.FAILED_PRECONDITION: errors.FailedPreconditionError,
    grpc.StatusCode.NOT_FOUND: errors.NotFoundError,
    grpc.StatusCode.ALREADY_EXISTS: errors.AlreadyExistsError,
    grpc.StatusCode.PERMISSION_DENIED: errors.PermissionDeniedError,
    grpc.StatusCode.UNAUTHENTICATED: errors.UnauthenticatedError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: errors.ResourceExhaustedError,
    grpc.StatusCode.UNAVAILABLE: errors.UnavailableError,
    grpc.StatusCode.DEADLINE_EXCEEDED: errors.UnavailableError,
    grpc.StatusCode.DATA_LOSS: errors.DataLossError,
}


def status_code_for(error: errors.TidemarkError) -> grpc.StatusCode | None:
    """The code for a mapped domain error (subclasses included); None = unexpected."""
    for cls in type(error).__mro__:
        code = STATUS_CODES.get(cls)
        if code is not None:
            return code
    return None


def error_metadata(error: errors.TidemarkError) -> tuple[tuple[str, str], ...]:
    """Trailing metadata naming the class and field (ASCII only, as gRPC requires)."""
    metadata = [(ERROR_CLASS_KEY, type(error).__name__)]
    if error.field is not None and error.field.isascii():
        metadata.append((ERROR_FIELD_KEY, error.field))
    if isinstance(error, errors.NotOwnerError) and error.owner.isascii():
        metadata.append((OWNER_KEY, error.owner))
    return tuple(metadata)


def error_from_status(
    code: grpc.StatusCode, details: str, metadata: Sequence[tuple[str, str | bytes]]
) -> errors.TidemarkError:
    """Rebuild the server's domain error; unmapped codes become a plain ``TidemarkError``."""
    values = {key: value for key, value in metadata if isinstance(value, str)}
    field = values.get(ERROR_FIELD_KEY)
    cls = _CLASSES_BY_NAME.get(values.get(ERROR_CLASS_KEY, "")) or _CLASSES_BY_CODE.get(code)
    if cls is None:
        return errors.TidemarkError(f"{code.name}: {details}")
    if field is not None and details.startswith(f"{field}: "):
        details = details[len(field) + 2 :]
    if cls is errors.NotOwnerError:
        return errors.NotOwnerError(details, field=field, owner=values.get(OWNER_KEY, ""))
    return cls(details, field=field)


def retry_after_s(metadata: Sequence[tuple[str, str | bytes]]) -> float:
    """The server's retry hint in seconds, 0 when absent or malformed."""
    for key, value in metadata:
        if key == RETRY_AFTER_KEY and isinstance(value, str) and value.isdigit():
            return int(value) / 1000
    return 0.0
