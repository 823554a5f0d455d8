"""The checks of the jobs' options (``WriteOptions``, ``ClusterOptions``,
``IndexBuildOptions``, a write's operation, an input's format): one wording for each kind
of bad value, an ``InvalidArgumentError`` naming the field, raised before any work."""

from __future__ import annotations

from collections.abc import Collection

from tidemark.errors import InvalidArgumentError


def require_between(field: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise InvalidArgumentError(f"must be {low} to {high}, got {value}", field=field)


def require_one_of(field: str, value: str, choices: Collection[str], what: str) -> None:
    """``value`` is one of ``choices``; the message names ``what`` it is and the choices."""
    if value not in choices:
        raise InvalidArgumentError(
            f"unknown {what} {value!r} (use {', '.join(choices)})", field=field
        )
