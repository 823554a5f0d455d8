"""Structured Streaming into a table: the ``foreachBatch`` function of a streaming query.

Each micro-batch is one ``write`` whose idempotency key is ``<query_id>-<batch_id>``. Spark
hands a batch again after a restart only when its checkpoint did not record it as done;
if the table already has a commit with that key the write does nothing, so every batch
is written exactly once. What a one-off write pays each time is paid once per query here:
the marker and index services are started at the first batch and kept until ``close``
(an embedded service keeps its index shards and block cache warm between batches), and
an empty batch returns at once without touching the table, and the partitions earlier
batches wrote are not listed again to check a batch's partition paths (``TableMemo``).

A batch that fails fails the query with a short error (``BatchFailedError``) naming the
batch and the cause; the whole error is logged and kept in ``failure``. Spark reads the
text of an error raised in ``foreachBatch``: when the query is stopping it matches
``(.|\r\n|\r|\n)*`` against it, one stack frame per character, so a traceback carrying a
Java stack trace (tens of KB) overflowed the stream thread's stack and the query ended
with no exception at all (``query.exception()`` None).
"""

from __future__ import annotations

import threading
from contextlib import ExitStack
from dataclasses import replace

import structlog
from pyspark.sql import DataFrame

from tidemark.closing import Closing
from tidemark.errors import InvalidArgumentError, TidemarkError
from tidemark.jobs.write import TableMemo, WriteResult, check_operation, write
from tidemark.jobs.write_options import DEFAULT_OPTIONS, MAX_IDEMPOTENCY_KEY_CHARS, WriteOptions
from tidemark.rpc.embedded import start_embedded_service

log = structlog.get_logger(__name__)

STREAM_OPTIONS = DEFAULT_OPTIONS
"""A stream's defaults: a write's (a batch touching a pending clustering plan's file groups
takes them from the plan, or waits for the plan's running or protected commit)."""

MAX_QUERY_ID_CHARS = MAX_IDEMPOTENCY_KEY_CHARS - 24
"""Room left in an idempotency key for ``-<batch id>`` (a long's 19 digits and more)."""
MAX_CAUSE_CHARS = 400
"""Of a failed batch's cause, what its ``BatchFailedError`` quotes (the first line)."""


class BatchFailedError(TidemarkError):
    """Micro-batch ``batch`` of a stream writer failed; ``cause`` is the error itself (the
    message quotes its first line only, so what Spark scans of it stays small)."""

    def __init__(self, query_id: str, batch: int, cause: BaseException) -> None:
        first_line = (str(cause).strip().splitlines() or [""])[0]
        if len(first_line) > MAX_CAUSE_CHARS:
            first_line = first_line[:MAX_CAUSE_CHARS] + "..."
        super().__init__(
            f"batch {batch} of query {query_id!r} failed, nothing of it committed: "
            f"{type(cause).__name__}: {first_line} (the stream writer's log and its "
            "`failure` have the whole error)",
            field="batch",
        )
        self.batch = batch
        self.cause = cause


class StreamWriter(Closing):
    """``foreachBatch``'s function for one streaming query: call it with ``(df, batch_id)``;
    ``close()`` (or leaving a ``with`` block) stops the services it started. It holds the
    table's canonical URI, not an opened table: its first batch may create the table, and
    each batch is a ``write``, which opens it."""

    def __init__(self, table_uri: str, operation: str, options: WriteOptions, query_id: str):
        check_operation(operation)
        if not query_id.strip() or len(query_id) > MAX_QUERY_ID_CHARS or not query_id.isprintable():
            raise InvalidArgumentError(
                f"must be 1 to {MAX_QUERY_ID_CHARS} printable characters, got {query_id!r}",
                field="query_id",
            )
        if options.idempotency_key is not None:
            raise InvalidArgumentError(
                "a stream writer keys each batch itself (<query_id>-<batch_id>)",
                field="idempotency_key",
            )
        self.table_uri = table_uri
        self.operation = operation
        self.query_id = query_id
        self._options = options
        self._serving: WriteOptions | None = None
        self._services = ExitStack()
        self._memo = TableMemo()
        self._lock = threading.Lock()
        self.results: list[WriteResult] = []
        """The last batches' results (the newest last), for a query's progress."""
        self.failure: BatchFailedError | None = None
        """The batch that failed the query, with its whole error (``cause``)."""

    @property
    def options(self) -> WriteOptions | None:
        """The options batches are written with, services' addresses included (None until
        the first batch and after ``close``)."""
        return self._serving

    def idempotency_key(self, batch_id: int) -> str:
        return f"{self.query_id}-{batch_id}"

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        """Write micro-batch ``batch_id``: nothing for an empty one, nothing again for one
        the table already committed (its result is appended to ``results``)."""
        with self._lock:
            try:
                result = self._write(df, batch_id)
            except Exception as error:
                failure = BatchFailedError(self.query_id, batch_id, error)
                log.error(
                    "stream.batch_failed",
                    table=self.table_uri,
                    query=self.query_id,
                    batch=batch_id,
                    exc_info=error,
                )
                self.failure = failure
                raise failure from None
            self.results = [*self.results[-99:], result]
        log.info(
            "stream.batch_written",
            table=self.table_uri,
            query=self.query_id,
            batch=batch_id,
            instant=result.instant or None,
            rows=result.rows_written,
            already_committed=result.already_committed,
            empty=result.empty_input,
        )

    def _write(self, df: DataFrame, batch_id: int) -> WriteResult:
        options = replace(self._started(), idempotency_key=self.idempotency_key(batch_id))
        return write(df.sparkSession, df, self.table_uri, self.operation, options, memo=self._memo)

    def _started(self) -> WriteOptions:
        """The options with the services' addresses, the embedded ones started at the
        first call."""
        if self._serving is None:
            options = self._options
            if options.markers == "service" and not options.marker_service_address:
                marker = self._services.enter_context(start_embedded_service("marker"))
                options = replace(options, marker_service_address=marker.address)
            if not options.index_service_address:
                index = self._services.enter_context(start_embedded_service("index"))
                options = replace(options, index_service_address=index.address)
            self._serving = options
        return self._serving

    def close(self) -> None:
        """Stop the embedded services (a later batch starts them again)."""
        with self._lock:
            self._services.close()
            self._serving = None
