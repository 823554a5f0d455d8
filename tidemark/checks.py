"""The checks of numeric settings and arguments, one wording each: ``must be > 0, got X``
and ``must be >= 0, got X``, raised as the error the caller names (InvalidArgumentError
for a request or an option, ConfigError for a flag or a TIDEMARK_* variable) with the
field. A NaN fails every comparison, so ``value <= 0`` lets it through: these compare the
other way round, and refuse the infinities too (no lease, size or count is endless)."""

from __future__ import annotations

import math

from tidemark.errors import InvalidArgumentError, TidemarkError


def require_positive(
    field: str, value: float, *, error: type[TidemarkError] = InvalidArgumentError
) -> None:
    """``value > 0`` and finite, else ``error`` naming ``field``."""
    if not (value > 0 and math.isfinite(value)):
        raise error(f"must be > 0, got {value}", field=field)


def require_non_negative(
    field: str,
    value: float,
    zero_means: str = "",
    *,
    error: type[TidemarkError] = InvalidArgumentError,
) -> None:
    """``value >= 0`` and finite, else ``error`` naming ``field``; ``zero_means`` says what
    0 does, in the message."""
    if not (value >= 0 and math.isfinite(value)):
        meaning = f" (0: {zero_means})" if zero_means else ""
        raise error(f"must be >= 0{meaning}, got {value}", field=field)
