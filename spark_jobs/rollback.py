"""Roll back failed writes (or one pending instant) of a table; for ``spark-submit``.

Rolling back needs no executors: it deletes the files named by the failed instant's
markers (on a merge-on-read table of version 6, appends a rollback command block to each
file slice the failed deltacommit appended to) and records a rollback instant, under the
table lock, then deletes the record index changes the failed write staged (never
visible: their instant never completed).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from tidemark.index.record_index import discard_staged
from tidemark.jobs.job_options import add_lock_wait_option
from tidemark.table import HoodieTable
from tidemark.table.leases.storage_lease import DEFAULT_LOCK_WAIT_S
from tidemark.table.leases.table_lock import changing
from tidemark.table.leases.write_lease import check_not_writing, forget_write
from tidemark.table.writes.commit import RollbackResult, rollback, rollback_failed_writes
from tidemark.table.writes.markers import StorageMarkerReader


def rollback_table(
    table: HoodieTable, instant: str | None = None, *, lock_wait_s: float = DEFAULT_LOCK_WAIT_S
) -> list[RollbackResult]:
    """Roll back ``instant`` (refused while its writer holds its lease), or every failed
    write when it is None (the table lock is waited for up to ``lock_wait_s``)."""
    markers = StorageMarkerReader(table.storage)
    with changing(table, "rollback", wait_s=lock_wait_s, merge_on_read=True):
        if instant is None:
            results = rollback_failed_writes(table, markers, lock_held=True)
        else:
            check_not_writing(table.storage, instant)
            results = [rollback(table, instant, markers)]
        for result in results:
            discard_staged(table.storage, result.rolled_back.timestamp)
            forget_write(table.storage, result.rolled_back.timestamp)
        return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="spark_jobs/rollback.py", description=__doc__)
    parser.add_argument("--table", required=True, help="table base URI")
    parser.add_argument("--instant", help="pending instant to roll back (default: all failed)")
    add_lock_wait_option(parser)
    args = parser.parse_args(argv)
    table = HoodieTable.open(args.table)
    for result in rollback_table(table, args.instant, lock_wait_s=args.lock_wait_s):
        print(f"rolled back {result.rolled_back.timestamp}: {len(result.deleted_files)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
