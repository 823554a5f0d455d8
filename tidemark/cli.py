"""The ``tidemark`` console script: wires the command modules and maps errors to exits.

Only the module of the command being run is imported (all of them for ``--help`` or an
unknown command), so ``tidemark serve`` starts without importing pyspark: a service
image needs no Spark, and a service starts half a second sooner.
"""

from __future__ import annotations

import argparse
import atexit
import os
import sys
from collections.abc import Sequence
from importlib.metadata import version
from typing import NoReturn

from tidemark.commands.spark_extra import add_needs_spark, import_command
from tidemark.config import export_client_arguments
from tidemark.errors import TidemarkError

COMMAND_MODULES: dict[str, str] = {
    "serve": "tidemark.commands.serve",
    "demo": "tidemark.commands.demo",
    "create": "tidemark.commands.table",
    "read": "tidemark.commands.table",
    "show": "tidemark.commands.table",
    "rollback": "tidemark.commands.table",
    "stats": "tidemark.commands.table",
    "upgrade": "tidemark.commands.table",
    "write": "tidemark.commands.write",
    "index": "tidemark.commands.index",
    "cluster": "tidemark.commands.cluster",
    "compaction": "tidemark.commands.compaction",
    "clean": "tidemark.commands.retention",
    "archive": "tidemark.commands.retention",
    "retention": "tidemark.commands.planner_retention",
}
"""Command name -> the module whose ``register(subparsers)`` adds it."""

DESCRIPTION = """\
Apache Hudi copy-on-write tables on S3 or a local disk, with Hudi's write markers, record-level
index and clustering run as gRPC services. Write and read tables, build and query their
record index, cluster, clean and archive them, or run the services (tidemark serve)."""
EPILOG = """\
examples:
  tidemark write --table s3://lake/events --input events.parquet --op bulk_insert \\
      --key event_id --partition day
  tidemark index build --table s3://lake/events
  tidemark read --table s3://lake/events --where event_id=e-42
  tidemark cluster schedule --table s3://lake/events --sort-columns session_id
  tidemark serve all --host 0.0.0.0 --allowed-root s3://lake

'tidemark COMMAND --help' lists a command's options; docs/cli.md has them all. Results go
to stdout; an error is one line on stderr and exit status 2."""

EXIT_USAGE = 2
DISTRIBUTION = "tidemark-hudi"
"""The name on PyPI (``tidemark`` there is another project); the import name is tidemark."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser for ``command`` alone when it is known, else for every command."""
    parser = argparse.ArgumentParser(
        prog="tidemark",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"tidemark {version(DISTRIBUTION)}")
    subparsers = parser.add_subparsers(dest="command", required=True)
    if command in COMMAND_MODULES:
        module_names = [COMMAND_MODULES[command]]
    else:
        module_names = list(dict.fromkeys(COMMAND_MODULES.values()))
    for module_name in module_names:
        module = import_command(module_name)
        if module is not None:
            module.register(subparsers)
            continue
        for name, owner in COMMAND_MODULES.items():
            if owner == module_name:
                add_needs_spark(subparsers, name, f"tidemark {name}")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Each command module sets ``handler`` (args -> exit code) on its subparser."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    return run_command(build_parser(arguments[0] if arguments else None).parse_args(arguments))


def run_command(args: argparse.Namespace) -> int:
    """Run the parsed command's ``handler``; a domain error is one line on stderr."""
    try:
        export_client_arguments(args)
        return int(args.handler(args))
    except TidemarkError as error:
        print(f"tidemark {args.command}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"tidemark {args.command}: interrupted", file=sys.stderr)
        return 130


def run() -> NoReturn:
    """The console script. Once the command is done, Python's exit handlers run and the
    process ends without the interpreter's teardown, where native thread pools still alive
    (Arrow's I/O threads, gRPC's) can abort a finished, successful run in C++
    (``terminate called without an active exception``, exit -6; seen at the demo's exit
    under load, and a known Arrow teardown race)."""
    code = main()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
