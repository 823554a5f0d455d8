"""``tidemark bench <name>``: benchmarks, one module each under BENCH_MODULES.

Each benchmark module exposes ``register(bench_subparsers)`` and sets ``handler`` on its
parser, exactly like the top-level command modules.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

BENCH_MODULES: tuple[str, ...] = (
    "tidemark.commands.bench_write",
    "tidemark.commands.bench_markers",
    "tidemark.commands.bench_small_files",
    "tidemark.commands.bench_index",
    "tidemark.commands.bench_clustering",
    "tidemark.commands.bench_datasource",
)


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "bench", help="run a benchmark", description=__doc__
    )
    benches = parser.add_subparsers(dest="bench", required=True)
    for module_name in BENCH_MODULES:
        importlib.import_module(module_name).register(benches)
