"""``python -m benchmarks <name>``: Tidemark's benchmarks, each against its baseline in
the same run (a side-by-side table, and one JSON line with ``--json``). They need the dev
extra (``pip install -e '.[dev]'``: moto, delta-rs, rocksdict, hudi-rs) and are not part
of the installed package."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from benchmarks.report import BENCH_MODULES
from tidemark.cli import run_command


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    benches = parser.add_subparsers(dest="command", required=True)
    for module_name in BENCH_MODULES:
        importlib.import_module(module_name).register(benches)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
