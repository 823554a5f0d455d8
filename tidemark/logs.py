"""structlog setup: JSON lines in services, console rendering locally.

Both structlog loggers and stdlib ``logging`` (grpc, boto3, py4j) go through one stderr
handler, and values bound with ``structlog.contextvars.bind_contextvars`` (``table``,
``instant``) or ``bind_call_fields`` (a gRPC call's ``request_id`` and ``method``) appear
on every line. stdout stays free for command output.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, MutableMapping
from contextvars import ContextVar
from typing import Any

import structlog
from structlog.typing import Processor

from tidemark.config import log_level_number

_HANDLER_NAME = "tidemark"

_call_fields: ContextVar[Mapping[str, str] | None] = ContextVar(
    "tidemark_call_fields", default=None
)


def bind_call_fields(fields: Mapping[str, str]) -> None:
    """Fields for every line logged in the current task (and threads it starts).

    One ContextVar set per gRPC call, read only when a line is logged: a Mapping may
    compute its values lazily, so a call that logs nothing pays nothing for them."""
    _call_fields.set(fields)


def merge_call_fields(
    logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    fields = _call_fields.get()
    if fields is not None:
        for key in fields:
            event_dict.setdefault(key, fields[key])
    return event_dict


_SHARED_PROCESSORS: list[Processor] = [
    structlog.contextvars.merge_contextvars,
    merge_call_fields,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
    structlog.processors.StackInfoRenderer(),
]


def configure_logging(json: bool, level: str = "info") -> None:
    """Idempotent: calling again replaces the previous handler instead of adding one."""
    numeric_level = log_level_number(level)
    renderer: Processor
    if json:
        renderer = structlog.processors.JSONRenderer()
        final_processors: list[Processor] = [structlog.processors.format_exc_info, renderer]
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
        final_processors = [renderer]
    structlog.configure(
        processors=[*_SHARED_PROCESSORS, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=_SHARED_PROCESSORS,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *final_processors],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for existing in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(numeric_level)
