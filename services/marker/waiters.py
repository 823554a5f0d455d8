"""Create calls waiting for their flush, answered on their event loop.

A create call awaits an asyncio future while its batch flushes on a worker thread.
Answering each future with its own ``call_soon_threadsafe`` would wake the loop once per
call; a batch hands all its answers to each loop in one callback instead. A caller that
went away meanwhile (cancelled, deadline) is skipped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import NamedTuple

Outcome = list[bool] | BaseException
"""Per marker True = created, False = existed; or why the call failed."""


class PendingCreate(NamedTuple):
    """One create call: its marker names and the future its handler awaits (a tuple:
    one is built per create, on the event loop)."""

    names: Sequence[str]
    future: asyncio.Future[list[bool]]


def answer_all(answers: Sequence[tuple[PendingCreate, Outcome]]) -> None:
    """Deliver outcomes from any thread, one loop callback per event loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[PendingCreate, Outcome]]] = {}
    for request, outcome in answers:
        by_loop.setdefault(request.future.get_loop(), []).append((request, outcome))
    for loop, items in by_loop.items():
        if not loop.is_closed():
            loop.call_soon_threadsafe(_answer_on_loop, items)


def _answer_on_loop(items: list[tuple[PendingCreate, Outcome]]) -> None:
    for request, outcome in items:
        if request.future.done():
            continue
        if isinstance(outcome, BaseException):
            request.future.set_exception(outcome)
        else:
            request.future.set_result(outcome)
