"""Argument types shared by the CLI commands."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """An integer above zero, else argparse's usage error (exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value
