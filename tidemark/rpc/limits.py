"""Memory bounds at the RPC edge: what a method may receive, and how many bytes of
requests a server holds at once.

gRPC's own limit (``grpc.max_receive_message_length``) is one number per server, so a
marker create would be allowed as much as an index lookup batch. Each method declares
its own ``MethodPolicy`` instead: the server's gRPC limit is the largest of them, and the
interceptor refuses a request over its method's limit before parsing it (a parsed
protobuf holds several times its bytes). Methods allowed more than
``BUDGETED_ABOVE`` also take their limit from the server's ``ByteBudget`` before their
message is read, and wait (their deadline permitting) while the budget is spent; the
others are bounded by ``max_concurrent_rpcs`` times their small limit.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from tidemark.rpc.auth import Role

KIB = 1024
SMALL_REQUEST_BYTES = 16 * KIB
"""A request naming a table, an instant and a few fields: well under a kilobyte."""
ANY_SIZE = 1 << 62
"""A method's limit meaning "up to the server's ``max_message_bytes``"."""
BUDGETED_ABOVE = 256 * KIB
"""Methods with a larger limit reserve it from the server's budget before reading."""
PARSED_FACTOR = 3
"""A parsed request held with its bytes: about this many times its size."""


@dataclass(frozen=True)
class MethodPolicy:
    """The role a method needs on the table it names, and its largest request."""

    role: Role
    request_bytes: int = SMALL_REQUEST_BYTES


DEFAULT_POLICY = MethodPolicy(Role.ADMIN)
"""A method its service does not describe: small requests, and only for admins."""


def receive_limit(policies: Iterable[MethodPolicy], max_message_bytes: int) -> int:
    """gRPC's one receive limit for a server: its largest method's."""
    return min(
        max((policy.request_bytes for policy in policies), default=SMALL_REQUEST_BYTES),
        max_message_bytes,
    )


class ByteBudget:
    """An asyncio counting semaphore of bytes, served in arrival order (a large request
    waiting is not overtaken forever by small ones). Runs on the server's event loop."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.free = capacity
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    async def take(self, amount: int) -> int:
        """Wait until ``amount`` bytes (at most the capacity) are free and take them;
        returns the amount taken, to ``give`` back."""
        amount = min(amount, self.capacity)
        if not self._waiters and self.free >= amount:
            self.free -= amount
            return amount
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (amount, future)
        self._waiters.append(entry)
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.give(amount)
            else:
                self._waiters.remove(entry)
                self._wake()
            raise
        return amount

    def give(self, amount: int) -> None:
        self.free += amount
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self._waiters[0][0] <= self.free:
            amount, future = self._waiters.popleft()
            self.free -= amount
            future.set_result(None)
