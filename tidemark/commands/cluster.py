"""``tidemark cluster``: clustering commands, one subcommand each."""

from __future__ import annotations

import argparse
from typing import Any

from tidemark.commands import cluster_plans
from tidemark.commands.spark_extra import add_needs_spark, import_command


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "cluster", help="cluster a table's small files", description=__doc__
    )
    commands = parser.add_subparsers(dest="cluster_command", required=True)
    cluster_plans.register(commands)
    cluster_run = import_command("tidemark.commands.cluster_run")
    if cluster_run is None:
        add_needs_spark(commands, "run", "tidemark cluster run")
    else:
        cluster_run.register(commands)
