"""Domain errors shared by every service, job and CLI command.

Each error names the offending field (when there is one) so a caller can act on it.
The gRPC server's interceptor maps these classes to status codes in one place; the CLI
prints ``str(error)`` and exits non-zero. Nothing else should translate errors.
"""

from __future__ import annotations


class TidemarkError(Exception):
    """Base class; ``field`` names the input that caused the error, if any."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}" if field else message)


class InvalidArgumentError(TidemarkError):
    """The request or input is malformed regardless of system state."""


class FailedPreconditionError(TidemarkError):
    """The input is well formed but the system is not in a state to accept it."""


class NotFoundError(TidemarkError):
    """A named table, instant, file or object does not exist."""


class AlreadyExistsError(TidemarkError):
    """A create-if-absent found the target already present."""


class PermissionDeniedError(TidemarkError):
    """Credentials are missing or wrong, or they do not allow the operation."""


class UnauthenticatedError(TidemarkError):
    """No valid credentials: a missing or unknown bearer token."""


class ConflictError(TidemarkError):
    """Another writer or owner holds the resource (lock, lease)."""


class NotOwnerError(ConflictError):
    """Another replica owns the resource (a marker dir's lease): ``owner`` is the address
    to ask instead, empty when unknown. Clients follow it (``tidemark.clients.marker``)."""

    def __init__(self, message: str, *, field: str | None = None, owner: str = "") -> None:
        super().__init__(message, field=field)
        self.owner = owner


class ResourceExhaustedError(TidemarkError):
    """A bounded queue or quota is full; the caller should back off and retry."""


class UnavailableError(TidemarkError):
    """A transient failure of a dependency (storage, a peer service)."""


class DataLossError(TidemarkError):
    """Stored data failed its checksum or is truncated: nothing read from it is trusted."""


class ConfigError(TidemarkError):
    """Configuration (flags, TIDEMARK_* env vars) is invalid."""


def with_note(error: TidemarkError, note: str) -> TidemarkError:
    """The same kind of error, naming the same field, with ``note`` appended to its message
    (e.g. whether a write's instant committed)."""
    return type(error)(f"{error.message}; {note}", field=error.field)
