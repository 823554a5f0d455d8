"""Domain errors raised inside executors, restored as the same class on the driver.

Spark wraps a Python task failure in ``PythonException`` carrying the traceback text; the
CLI and callers should see the original ``tidemark.errors`` exception naming its field.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar

import structlog
from py4j.protocol import Py4JJavaError
from pyspark.errors.exceptions.captured import PythonException

from tidemark import errors

log = structlog.get_logger(__name__)
T = TypeVar("T")
_DOMAIN_ERROR = re.compile(r"tidemark\.errors\.(?P<kind>\w+Error): (?P<text>[^\n]*)")
_FIELD = re.compile(r"(?P<field>[\w.,]+): (?P<message>.*)")


def run_spark_action(action: Callable[[], T]) -> T:
    """Run a Spark action (of a DataFrame, or of an RDD, whose failures reach Python as
    ``Py4JJavaError``); a domain error from a task is re-raised as itself (the task's
    trace goes to the debug log: the user sees one line)."""
    try:
        return action()
    except (PythonException, Py4JJavaError) as failure:
        restored = domain_error_from(str(failure))
        if restored is None:
            raise
        log.debug("spark.task_failed", error=str(restored), trace=str(failure))
        raise restored from failure


def domain_error_from(text: str) -> errors.TidemarkError | None:
    """The last domain error named in a task traceback, or None."""
    matches = list(_DOMAIN_ERROR.finditer(text))
    if not matches:
        return None
    kind = getattr(errors, matches[-1].group("kind"), None)
    if not (isinstance(kind, type) and issubclass(kind, errors.TidemarkError)):
        return None
    text_part = matches[-1].group("text")
    field_match = _FIELD.fullmatch(text_part)
    if field_match is None:
        return kind(text_part)
    return kind(field_match.group("message"), field=field_match.group("field"))
