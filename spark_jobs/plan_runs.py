"""What the runs of table-service plans share (clustering, ``cluster.py``; compaction,
``compaction.py``): the plan's run lease held for the whole run, a failed run rolled back
to its plan under the table lock, and a merge-on-read slice read merged in a task.

A run holds the table lock only for its start and its commit; the run lease
(``tidemark/table/leases/plan_run.py``) keeps two runners off one plan and lets the next
run take over, and roll back, a plan whose runner died.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pyarrow as pa
import structlog

from tidemark.errors import ConflictError, TidemarkError, with_note
from tidemark.jobs.context import WriteContext
from tidemark.jobs.job_options import Locking
from tidemark.storage import Storage
from tidemark.table import HoodieTable
from tidemark.table.files.merge import read_slice
from tidemark.table.files.view import FileSlice
from tidemark.table.leases.plan_run import forget_runs, run_lock
from tidemark.table.leases.storage_lease import StorageLease
from tidemark.table.leases.table_lock import holding, owner_name
from tidemark.table.records.keys import FILE_NAME
from tidemark.table.records.schema import conform

log = structlog.get_logger(__name__)


@contextmanager
def plan_run(
    table: HoodieTable, instant: str, role: str, locking: Locking, *, only: bool, what: str
) -> Iterator[StorageLease | None]:
    """The run lease of plan ``instant`` for the block (``what``: the plan's kind, for
    errors); None when another runner holds it and the plan was not asked for by name
    (``only``: then the ConflictError naming the runner is raised). The leases are
    forgotten once the run ends without error."""
    run = run_lock(
        table.storage,
        instant,
        owner_name(role),
        locking.lease_s,
        on_lost=locking.cancel,
        what=what,
    )
    try:
        run.acquire()
    except ConflictError:
        if only:
            raise
        log.info(f"{role}.plan_run_elsewhere", table=table.uri, instant=instant)
        yield None
        return
    with holding(run):
        yield run
    forget_runs(table.storage, instant)


def undo_failed_run(
    table: HoodieTable,
    instant: str,
    run: StorageLease,
    failure: Exception,
    locked: Callable[[], AbstractContextManager[StorageLease]],
    to_plan: Callable[[StorageLease], None],
    what: str,
) -> Exception:
    """Roll a failed run back to its plan (``to_plan``, given the table lock ``locked``
    takes), unless its run lease was lost (the plan is another runner's now) or it
    completed; ``failure`` is returned with a note saying what became of the plan."""
    try:
        run.check()
        with locked() as lock:
            table.timeline.reload()
            if table.timeline.find(instant).is_completed:
                return failure
            to_plan(lock)
    except TidemarkError as error:
        log.warning("plan_run.rollback_failed", table=table.uri, instant=instant, error=str(error))
        note = f"{what} {instant} failed and is left inflight: the next run rolls it back"
    else:
        note = f"{what} {instant} failed and was rolled back; its plan stays pending"
    if isinstance(failure, TidemarkError):
        return with_note(failure, note)
    failure.add_note(note)
    return failure


def merged_slice_rows(
    storage: Storage, piece: FileSlice, deltacommits: Mapping[str, str], context: WriteContext
) -> pa.Table:
    """A merge-on-read slice's rows as a snapshot reads them (its base file merged with
    the blocks of ``deltacommits``, requested -> completion time), conformed to the file
    schema with the file name left null for the writer: what a plan's run rewrites, ordered
    by record key as a bulk insert's files are."""
    schema = pa.schema([field for field in context.file_schema if field.name != FILE_NAME])
    rows = read_slice(storage, piece, deltacommits, context.config, schema, by_key=True)
    return conform(rows, context.file_schema)


def submit_main(
    prog: str,
    description: str | None,
    add_arguments: Callable[[argparse.ArgumentParser], None],
    run: Callable[[argparse.Namespace], Sequence[Any]],
    argv: Sequence[str] | None,
) -> int:
    """A plan run's ``spark-submit`` entry: its options parsed (the master left to
    spark-submit), each result printed."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    add_arguments(parser)
    parser.set_defaults(master=None)
    for result in run(parser.parse_args(argv)):
        print(result)
    return 0
