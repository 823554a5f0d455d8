"""structlog setup: JSON lines in services, console rendering locally, and the library's
quiet default in users' own processes.

``configure_logging`` (``tidemark serve`` and the other commands): both structlog loggers
and stdlib ``logging`` (grpc, boto3, py4j) go through one stderr handler, and values bound
with ``structlog.contextvars.bind_contextvars`` (``table``, ``instant``) or
``bind_call_fields`` (a gRPC call's ``request_id`` and ``method``) appear on every line.
``use_library_defaults`` (run by ``import tidemark``): in a user's job, Tidemark's lines go
to stderr from WARNING up (``TIDEMARK_LOG_LEVEL`` or the ``tidemark`` stdlib logger's level
changes that). stdout stays free for command output and the user's own.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping, MutableMapping
from contextvars import ContextVar
from typing import Any

import structlog
from structlog.typing import Processor

from tidemark.config import LOG_LEVELS, log_level_number
from tidemark.errors import ConfigError

_HANDLER_NAME = "tidemark"
LIBRARY_LOGGER = "tidemark"
"""The stdlib logger every Tidemark module's logger descends from (``tidemark.*``)."""
LIBRARY_LEVEL_ENV = "TIDEMARK_LOG_LEVEL"
LIBRARY_DEFAULT_LEVEL = "warning"

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


class _UnlessConfigured(logging.Filter):
    """Passes records only while the root logger has no handler: an application that
    configured logging gets Tidemark's lines once, through its own handlers."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not logging.getLogger().handlers


def use_library_defaults() -> None:
    """Tidemark used as a library, in a process that did not configure structlog: its
    lines go through stdlib logging to stderr, from ``TIDEMARK_LOG_LEVEL`` (default
    WARNING) up, instead of structlog's default of every level on stdout, where a user's
    job prints its own output. An unknown level is said in one line, and WARNING kept."""
    if structlog.is_configured():
        return
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *_SHARED_PROCESSORS,
            structlog.dev.ConsoleRenderer(colors=False),
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    library = logging.getLogger(LIBRARY_LOGGER)
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.addFilter(_UnlessConfigured())
    _replace_handler(library, handler)
    level = os.environ.get(LIBRARY_LEVEL_ENV, LIBRARY_DEFAULT_LEVEL)
    try:
        library.setLevel(log_level_number(level))
    except ConfigError:
        library.setLevel(log_level_number(LIBRARY_DEFAULT_LEVEL))
        structlog.get_logger(__name__).warning(
            "logs.unknown_level", env=LIBRARY_LEVEL_ENV, value=level, levels=list(LOG_LEVELS)
        )


def _replace_handler(logger: logging.Logger, handler: logging.Handler | None) -> None:
    """``logger`` with ``handler`` (None: no handler) in place of the one set up before."""
    for existing in [h for h in logger.handlers if h.get_name() == _HANDLER_NAME]:
        logger.removeHandler(existing)
    if handler is not None:
        logger.addHandler(handler)


def configure_logging(json: bool, level: str = "info") -> None:
    """Idempotent: calling again replaces the previous handler instead of adding one. The
    library's default (``use_library_defaults``) gives way: ``level`` applies to
    Tidemark's loggers too."""
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
    _replace_handler(root, handler)
    root.setLevel(numeric_level)
    library = logging.getLogger(LIBRARY_LOGGER)
    _replace_handler(library, None)
    library.setLevel(logging.NOTSET)
