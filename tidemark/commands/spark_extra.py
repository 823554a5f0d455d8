"""Commands that run Spark jobs need the ``spark`` extra; the base package (what a service
image installs) has none. Such a command is still listed, and running it says in one line
what to install instead of an ImportError's traceback."""

from __future__ import annotations

import argparse
import importlib
from types import ModuleType
from typing import Any

from tidemark.errors import FailedPreconditionError

SPARK_EXTRA_MODULES = frozenset({"pyspark", "py4j", "pandas"})
INSTALL_HINT = "pip install 'tidemark-hudi[spark]'"


def import_command(module_name: str) -> ModuleType | None:
    """The command module, or None when it needs the Spark extra and that is missing."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if (error.name or "").partition(".")[0] not in SPARK_EXTRA_MODULES:
            raise
        return None


def add_needs_spark(subparsers: Any, name: str, command: str) -> None:
    """Add ``name`` as a command that explains what to install (``command`` is its full
    name for the message); it takes any arguments, so the message is what a user sees."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help=f"(needs the Spark extra: {INSTALL_HINT})",
        add_help=False,
        prefix_chars="\0",  # no flags: every argument, --help too, is taken as it comes
    )
    parser.add_argument("arguments", nargs="*")

    def explain(_args: argparse.Namespace) -> int:
        raise FailedPreconditionError(
            f"{command} runs Spark jobs, and pyspark is not installed: {INSTALL_HINT}",
            field="command",
        )

    parser.set_defaults(handler=explain)
