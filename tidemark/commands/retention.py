"""``tidemark clean`` and ``tidemark archive``: keep a table bounded on storage and timeline."""

from __future__ import annotations

import argparse
import json
from typing import Any

from tidemark.commands.args import positive_int
from tidemark.jobs.job_options import add_lock_wait_option
from tidemark.logs import configure_logging
from tidemark.retention import RetentionSettings, archive_table, clean_table
from tidemark.table import HoodieTable
from tidemark.table.maintenance.archival import DEFAULT_KEEP_MAX, DEFAULT_KEEP_MIN, ArchiveSettings
from tidemark.table.maintenance.clean_plan import (
    DEFAULT_RETAIN_COMMITS,
    DEFAULT_RETAIN_HOURS,
    DEFAULT_RETAIN_VERSIONS,
    CleanPolicy,
    CleanSettings,
)
from tidemark.table.maintenance.orphans import DEFAULT_GRACE_S, find_orphans, remove_orphans
from tidemark.table.plans.compaction import DEFAULT_MAX_DELTA_COMMITS


def register(subparsers: Any) -> None:
    clean = subparsers.add_parser(
        "clean",
        help="delete file slices outside the retention (Hudi's cleaner), or orphan files",
        description="Plan and run a clean as Hudi's cleaner does (an instant <t>.clean on the "
        "timeline); with --orphans, remove data files no completed instant names instead.",
    )
    clean.add_argument("--table", required=True, help="table base URI")
    add_clean_arguments(clean)
    clean.add_argument(
        "--orphans",
        action="store_true",
        help="remove orphan data files (no completed instant names them) older than "
        "--grace-hours instead of cleaning",
    )
    clean.add_argument(
        "--grace-hours",
        type=float,
        default=DEFAULT_GRACE_S / 3600,
        help=f"orphans younger than this are kept (default {DEFAULT_GRACE_S / 3600:g})",
    )
    clean.add_argument("--dry-run", action="store_true", help="list what would be deleted")
    clean.add_argument("--json", action="store_true", help="print the result as one JSON line")
    add_lock_wait_option(clean)
    clean.set_defaults(handler=run_clean)

    archive = subparsers.add_parser(
        "archive",
        help="move old completed instants to Hudi's archived timeline",
        description="Keep between --keep-min-commits and --keep-max-commits completed writes "
        "on the active timeline, as Hudi's archiver does.",
    )
    archive.add_argument("--table", required=True, help="table base URI")
    add_archive_arguments(archive)
    archive.add_argument(
        "--retain-commits",
        type=positive_int,
        default=DEFAULT_RETAIN_COMMITS,
        help="the cleaner's retained commits, which --keep-min-commits must exceed",
    )
    archive.add_argument("--json", action="store_true", help="print the result as one JSON line")
    add_lock_wait_option(archive)
    archive.set_defaults(handler=run_archive)


def add_clean_arguments(parser: argparse.ArgumentParser) -> None:
    """``--policy`` and one of ``--retain-commits|--retain-versions|--retain-hours``."""
    parser.add_argument(
        "--policy",
        choices=list(CleanPolicy),
        help="cleaner policy (default KEEP_LATEST_COMMITS, or the one a --retain-* implies)",
    )
    retain = parser.add_mutually_exclusive_group()
    retain.add_argument(
        "--retain-commits",
        type=positive_int,
        help=f"KEEP_LATEST_COMMITS: snapshots of the last N commits stay readable "
        f"(default {DEFAULT_RETAIN_COMMITS})",
    )
    retain.add_argument(
        "--retain-versions",
        type=positive_int,
        help=f"KEEP_LATEST_FILE_VERSIONS: slices kept per file group "
        f"(default {DEFAULT_RETAIN_VERSIONS})",
    )
    retain.add_argument(
        "--retain-hours",
        type=float,
        help=f"KEEP_LATEST_BY_HOURS: snapshots of the last H hours stay readable "
        f"(default {DEFAULT_RETAIN_HOURS:g})",
    )


def add_archive_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--keep-min-commits",
        type=positive_int,
        default=DEFAULT_KEEP_MIN,
        help=f"completed writes left on the active timeline (default {DEFAULT_KEEP_MIN})",
    )
    parser.add_argument(
        "--keep-max-commits",
        type=positive_int,
        default=DEFAULT_KEEP_MAX,
        help=f"archive once more completed writes than this are active "
        f"(default {DEFAULT_KEEP_MAX})",
    )
    parser.add_argument(
        "--compaction-delta-commits",
        type=positive_int,
        default=DEFAULT_MAX_DELTA_COMMITS,
        metavar="N",
        help="merge-on-read tables: keep the deltacommits compaction's trigger counts, as "
        "Hudi's archiver (hoodie.compact.inline.max.delta.commits, "
        f"default {DEFAULT_MAX_DELTA_COMMITS})",
    )


def clean_settings(args: argparse.Namespace) -> CleanSettings:
    """The policy named, else the one the ``--retain-*`` flag given implies."""
    implied = (
        CleanPolicy.KEEP_LATEST_FILE_VERSIONS
        if args.retain_versions is not None
        else CleanPolicy.KEEP_LATEST_BY_HOURS
        if args.retain_hours is not None
        else CleanPolicy.KEEP_LATEST_COMMITS
    )
    defaults = CleanSettings()
    return CleanSettings(
        policy=CleanPolicy(args.policy or implied),
        retain_commits=args.retain_commits or defaults.retain_commits,
        retain_versions=args.retain_versions or defaults.retain_versions,
        retain_hours=args.retain_hours or defaults.retain_hours,
    )


def run_clean(args: argparse.Namespace) -> int:
    configure_logging(json=False, level="warning")
    if args.orphans:
        return _run_orphans(args)
    settings = clean_settings(args)
    result = clean_table(
        HoodieTable.open(args.table), settings, dry_run=args.dry_run, wait_s=args.lock_wait_s
    )
    if args.json:
        print(
            json.dumps(
                {
                    "instants": result.instants,
                    "files_deleted": 0 if args.dry_run else result.files_deleted,
                    "files": [f for files in result.deleted.values() for f in files],
                    "earliest_to_retain": result.earliest_to_retain,
                    "dry_run": args.dry_run,
                }
            )
        )
        return 0
    verb = "would delete" if args.dry_run else "deleted"
    for files in result.deleted.values():
        for path in files:
            print(f"{verb} {path}")
    done = f" in clean {', '.join(result.instants)}" if result.instants else ""
    print(
        f"{verb} {result.files_deleted} files{done}; earliest readable instant: "
        f"{result.earliest_to_retain or 'all retained'}"
    )
    return 0


def _run_orphans(args: argparse.Namespace) -> int:
    table = HoodieTable.open(args.table)
    orphans = find_orphans(table, args.grace_hours * 3600)
    if not args.dry_run:
        remove_orphans(table, orphans)
    total = sum(orphan.size for orphan in orphans)
    if args.json:
        print(
            json.dumps(
                {
                    "orphans": [{"path": o.path, "bytes": o.size} for o in orphans],
                    "bytes": total,
                    "dry_run": args.dry_run,
                }
            )
        )
        return 0
    verb = "orphan" if args.dry_run else "deleted orphan"
    for orphan in orphans:
        print(f"{verb} {orphan.path} {orphan.size} bytes")
    print(f"{len(orphans)} orphan files, {total} bytes{' (dry run)' if args.dry_run else ''}")
    return 0


def run_archive(args: argparse.Namespace) -> int:
    configure_logging(json=False, level="warning")
    settings = RetentionSettings(
        CleanSettings(retain_commits=args.retain_commits),
        ArchiveSettings(
            args.keep_min_commits,
            args.keep_max_commits,
            compaction_delta_commits=args.compaction_delta_commits,
        ),
    )
    result = archive_table(HoodieTable.open(args.table), settings, wait_s=args.lock_wait_s)
    if args.json:
        print(
            json.dumps(
                {
                    "archived": result.archived,
                    "rolled_forward": result.rolled_forward,
                    "archive_file": result.archive_file,
                }
            )
        )
        return 0
    if result.rolled_forward:
        print(f"finished an interrupted archival of {len(result.rolled_forward)} instants")
    if result.archived:
        print(f"archived {len(result.archived)} instants to {result.archive_file}")
    else:
        print("nothing to archive")
    return 0
