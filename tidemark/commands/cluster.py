"""``tidemark cluster``: clustering commands, one subcommand each."""

from __future__ import annotations

import argparse
from typing import Any

from tidemark.commands import cluster_plans, cluster_run


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "cluster", help="cluster a table's small files", description=__doc__
    )
    commands = parser.add_subparsers(dest="cluster_command", required=True)
    cluster_plans.register(commands)
    cluster_run.register(commands)
