"""``tidemark index lookup|stats|compact|build``: ask a table's record index through the index
service, or build it (``tidemark.commands.index_build``, Spark).

Without ``--index-service`` the command starts an embedded service in this process for
the one call, so the answer always comes through the same gRPC path executors use. Each
subcommand is a ``_add_<name>`` function registering its parser and handler.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa

from tidemark.checks import require_positive
from tidemark.clients.index import IndexClient
from tidemark.commands.index_build import add_build
from tidemark.config import add_client_arguments
from tidemark.errors import InvalidArgumentError
from tidemark.logs import configure_logging

ABSENT = "absent"


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "index",
        help="query a table's record-level index",
        description="Query a table's record-level index (record key -> file group).",
    )
    commands = parser.add_subparsers(dest="index_command", required=True)
    for add in (_add_lookup, _add_stats, _add_compact, add_build):
        add(commands)


def add_service_arguments(parser: argparse.ArgumentParser) -> None:
    """``--table`` and ``--index-service``, which every index subcommand takes."""
    parser.add_argument("--table", required=True, help="table base URI (path or s3://)")
    parser.add_argument(
        "--index-service",
        metavar="HOST:PORT[,HOST:PORT...]",
        help="index service address, or the replicas' addresses comma-separated (each "
        "shard routed to one, failing over to the next when it is down); default: start "
        "an embedded one in this process",
    )
    add_client_arguments(parser)


def _add_lookup(commands: Any) -> None:
    lookup: argparse.ArgumentParser = commands.add_parser(
        "lookup",
        help="print each key's location (partition, file id, instant) or 'absent'",
        description="Print each key's location, one line per key: the key, its partition "
        "path, file id and instant, tab-separated, or the key and 'absent'.",
    )
    add_service_arguments(lookup)
    keys = lookup.add_mutually_exclusive_group(required=True)
    keys.add_argument("keys", nargs="*", default=[], metavar="KEY", help="record keys")
    keys.add_argument("--keys-file", metavar="FILE", help="a file with one key per line")
    lookup.add_argument(
        "--json",
        action="store_true",
        help='one JSON object on one line: key -> {"partition", "file_id", "instant"} or null',
    )
    lookup.set_defaults(handler=run_lookup)


def _add_stats(commands: Any) -> None:
    stats: argparse.ArgumentParser = commands.add_parser(
        "stats", help="entries, shards, bytes and the service's block cache hit rate"
    )
    add_service_arguments(stats)
    stats.add_argument("--json", action="store_true", help="one JSON object on one line")
    stats.set_defaults(handler=run_stats)


def _add_compact(commands: Any) -> None:
    compact: argparse.ArgumentParser = commands.add_parser(
        "compact",
        help="fold the index's visible deltas into new base files now",
        description="Fold each shard's visible deltas (committed changes) into a new base "
        "file and delete the files this makes useless. The index service does this in the "
        "background once a shard has TIDEMARK_INDEX_COMPACT_DELTAS deltas.",
    )
    add_service_arguments(compact)
    compact.add_argument(
        "--min-deltas",
        type=int,
        default=1,
        help=(
            "compact only shards with at least this many deltas (default 1: every one), "
            "and those whose deltas hold as many entries as their base"
        ),
    )
    compact.add_argument("--json", action="store_true", help="one JSON object on one line")
    compact.set_defaults(handler=run_compact)


@contextmanager
def index_client(args: argparse.Namespace) -> Iterator[IndexClient]:
    """A client of ``--index-service``, or of an embedded service stopped on exit."""
    configure_logging(json=False, level="warning")
    if args.index_service:
        client = IndexClient(args.index_service, args.table)
        client.check_reachable()
        yield client
        return
    from tidemark.services.index.embedded import start_embedded_index_service

    with start_embedded_index_service() as service:
        yield IndexClient(service.address, args.table)


def run_lookup(args: argparse.Namespace) -> int:
    keys = read_keys(Path(args.keys_file)) if args.keys_file else list(args.keys)
    if not keys:
        raise InvalidArgumentError("give at least one key", field="keys")
    with index_client(args) as client:
        located = client.lookup(keys)
    print_locations(located, as_json=args.json)
    return 0


def read_keys(path: Path) -> list[str]:
    """One key per line (\\n or \\r\\n); an empty line is an error naming it."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InvalidArgumentError(f"cannot read {path}: {error}", field="keys_file") from None
    keys = [line.removesuffix("\r") for line in text.split("\n")]
    if keys and keys[-1] == "":
        keys.pop()
    for number, key in enumerate(keys, start=1):
        if not key:
            raise InvalidArgumentError(f"line {number} of {path} is empty", field="keys_file")
    return keys


def print_locations(located: pa.Table, *, as_json: bool) -> None:
    rows: list[dict[str, Any]] = located.to_pylist()
    if as_json:
        answer = {row["key"]: _location(row) for row in rows}
        print(json.dumps(answer, ensure_ascii=False, separators=(",", ":")))
        return
    for row in rows:
        location = _location(row)
        fields = [ABSENT] if location is None else list(location.values())
        print("\t".join([row["key"], *fields]))


def _location(row: dict[str, Any]) -> dict[str, str] | None:
    if row["partition"] is None:
        return None
    return {"partition": row["partition"], "file_id": row["file_id"], "instant": row["instant"]}


def run_stats(args: argparse.Namespace) -> int:
    with index_client(args) as client:
        stats = client.stats()
    values: dict[str, float] = {
        "entries": stats.entries,
        "shards": stats.shards,
        "bytes": stats.bytes,
        "delta_files": stats.delta_files,
        "max_shard_deltas": stats.max_shard_deltas,
    }
    if args.index_service:
        values |= {
            "block_cache_hit_rate": round(stats.cache_hit_rate, 4),
            "block_cache_bytes": stats.cache_bytes,
            "block_cache_capacity_bytes": stats.cache_capacity_bytes,
        }
    elif not args.json:
        print(
            "(block cache figures belong to a running service: ask it with --index-service)",
            file=sys.stderr,
        )
    _print_values(values, as_json=args.json)
    return 0


def _print_values(values: dict[str, Any], *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(values, separators=(",", ":")))
    else:
        for name, value in values.items():
            print(f"{name}\t{value}")


def run_compact(args: argparse.Namespace) -> int:
    require_positive("min_deltas", args.min_deltas)
    with index_client(args) as client:
        done = client.compact(args.min_deltas)
    _print_values(dataclasses.asdict(done), as_json=args.json)
    return 0
