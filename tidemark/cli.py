"""The ``tidemark`` console script: wires the command modules and maps errors to exits."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from tidemark.errors import TidemarkError

COMMAND_MODULES: tuple[str, ...] = (
    "tidemark.commands.serve",
    "tidemark.commands.demo",
    "tidemark.commands.table",
    "tidemark.commands.write",
    "tidemark.commands.bench",
)

EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tidemark", description=__doc__)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Each command module sets ``handler`` (args -> exit code) on its subparser."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except TidemarkError as error:
        print(f"tidemark {args.command}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"tidemark {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
