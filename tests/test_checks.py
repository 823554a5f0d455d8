"""The one check of positive and non-negative numbers: NaN and the infinities fail it
(``value <= 0`` would let a NaN through), and the error names the field."""

from __future__ import annotations

import math

import pytest

from tidemark.checks import require_non_negative, require_positive
from tidemark.errors import ConfigError, InvalidArgumentError


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 0, 0.0, -1, -0.5])
def test_require_positive_refuses(value: float) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        require_positive("lease_s", value)
    assert (raised.value.field, raised.value.message) == ("lease_s", f"must be > 0, got {value}")


@pytest.mark.parametrize("value", [1, 0.001, 5e300])
def test_require_positive_accepts(value: float) -> None:
    require_positive("lease_s", value)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, -1, -1e-9])
def test_require_non_negative_refuses(value: float) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        require_non_negative("wait_s", value, "fail at once")
    assert raised.value.field == "wait_s"
    assert raised.value.message == f"must be >= 0 (0: fail at once), got {value}"


@pytest.mark.parametrize("value", [0, 0.0, 3])
def test_require_non_negative_accepts(value: float) -> None:
    require_non_negative("wait_s", value)


def test_the_error_is_the_callers() -> None:
    """A flag or TIDEMARK_* variable is a ConfigError, not a bad request."""
    with pytest.raises(ConfigError, match=r"^workers: must be > 0, got nan$"):
        require_positive("workers", math.nan, error=ConfigError)
    with pytest.raises(ConfigError, match=r"^grace_period_s: must be >= 0, got -1$"):
        require_non_negative("grace_period_s", -1, error=ConfigError)
