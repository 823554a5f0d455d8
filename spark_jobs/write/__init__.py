"""The write job: bulk_insert, insert, upsert, delete and insert_overwrite into a COW table.

One module per step (``steps`` runs them in order): the driver validates the input and
prepares keyed rows before touching the table, so bad input leaves the timeline untouched
(``prepare``). It tags the keys with their file groups (``tag``); then, under the table
lock, it rolls back failed writes, plans file groups and requests an instant, holding a
lease of its own from then on (``begin``); without the lock, executors write base files
through storage, each behind its marker, and the record index changes are staged
(``files``, ``index``); under the lock again it checks for conflicts with writes completed
meanwhile and completes the commit: reconcile, publish, drop the markers (``commit``);
then it cleans and archives (``retention``) and, on a merge-on-read table with
``compact_after``, compacts (``compaction``). ``WriteJob`` (``job``) is what the steps
share. Run from Python (``write``), ``tidemark write`` or ``spark-submit
spark_jobs/write/__main__.py`` (``cli``).
"""

from tidemark.jobs.write.cli import add_arguments, main, run
from tidemark.jobs.write.result import (
    DUPLICATING_OPERATIONS,
    OPERATION_TYPES,
    TableMemo,
    WriteResult,
    check_operation,
)
from tidemark.jobs.write.steps import write

__all__ = [
    "DUPLICATING_OPERATIONS",
    "OPERATION_TYPES",
    "TableMemo",
    "WriteResult",
    "add_arguments",
    "check_operation",
    "main",
    "run",
    "write",
]
