"""Memory bounds at the RPC edge: which server reads a method's requests, and how many
bytes of requests each caller holds at once.

gRPC's own limit (``grpc.max_receive_message_length``) is one number per server, and it
is the only limit that holds before a message is buffered: once the application asks for
a message, gRPC reads all of it, whatever the interceptor would say of its size. Each
method declares its own ``MethodPolicy``, and a service's methods are served by two
servers (``tidemark.rpc.server``): the small ones (every request at most
``BULK_ABOVE``), with health and reflection, on a server whose limit is theirs, and the
bulk ones on a server of their own whose limit is the largest of theirs. A small request
is then bounded by that small limit times ``max_concurrent_rpcs`` before it is read, and
a bulk request is read only once its caller is admitted and has reserved the bulk
server's limit from the ``ByteBudget``.

The budget is shared per caller (its token, else its client certificate, else its
host): one caller holds at most its share; bytes freed go first to the waiting caller
holding least, so a caller over its share waits without holding up the others.
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
BULK_ABOVE = 256 * KIB
"""Methods with a larger limit are served by the bulk server and reserve its limit from
the budget before reading."""
PARSED_FACTOR = 3
"""A parsed request held with its bytes: about this many times its size."""


@dataclass(frozen=True)
class MethodPolicy:
    """The role a method needs on the table it names, and its largest request."""

    role: Role
    request_bytes: int = SMALL_REQUEST_BYTES

    @property
    def bulk(self) -> bool:
        return self.request_bytes > BULK_ABOVE


DEFAULT_POLICY = MethodPolicy(Role.ADMIN)
"""A method its service does not describe: small requests, and only for admins."""


def receive_limit(policies: Iterable[MethodPolicy], max_message_bytes: int) -> int:
    """gRPC's one receive limit for a server: its largest method's."""
    return min(
        max((policy.request_bytes for policy in policies), default=SMALL_REQUEST_BYTES),
        max_message_bytes,
    )


class ByteBudget:
    """An asyncio counting semaphore of bytes shared fairly by callers: each holds at
    most ``caller_capacity``; bytes freed go to the waiting caller holding least (its
    calls in arrival order), and a caller waiting only on its own share holds up no
    other. Runs on the server's event loop."""

    def __init__(self, capacity: int, caller_capacity: int) -> None:
        self.capacity = capacity
        self.caller_capacity = min(caller_capacity, capacity)
        self.used = 0
        self.waits = 0
        """Takes that had to wait, since the start."""
        self.idle_ends = 0
        """Calls ended for sending no whole message within their idle time (counted by
        the interceptor)."""
        self._held: dict[str, int] = {}
        self._waiting: dict[str, deque[tuple[int, asyncio.Future[None]]]] = {}

    @property
    def waiting_calls(self) -> int:
        return sum(len(queue) for queue in self._waiting.values())

    @property
    def waiting_callers(self) -> int:
        return len(self._waiting)

    async def take(self, caller: str, amount: int) -> int:
        """Wait until ``caller`` may hold ``amount`` more bytes (at most its share) and
        take them; returns the amount taken, to ``give`` back."""
        amount = min(amount, self.caller_capacity)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (amount, future)
        self._waiting.setdefault(caller, deque()).append(entry)
        self._wake()
        if not future.done():
            self.waits += 1
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.give(caller, amount)
            else:
                self._withdraw(caller, entry)
            raise
        return amount

    def give(self, caller: str, amount: int) -> None:
        held = self._held[caller] - amount
        if held:
            self._held[caller] = held
        else:
            del self._held[caller]
        self.used -= amount
        self._wake()

    def _withdraw(self, caller: str, entry: tuple[int, asyncio.Future[None]]) -> None:
        """Forget a cancelled take (``_wake`` may have dropped it already)."""
        queue = self._waiting.get(caller)
        if queue is not None and entry in queue:
            queue.remove(entry)
            if not queue:
                del self._waiting[caller]
        self._wake()

    def _wake(self) -> None:
        """Grant the first call of the waiting caller holding least, among those whose
        share allows it, while the bytes are free (none overtakes it meanwhile)."""
        while True:
            eligible = [
                caller
                for caller, queue in self._waiting.items()
                if self._held.get(caller, 0) + queue[0][0] <= self.caller_capacity
            ]
            if not eligible:
                return
            caller = min(eligible, key=lambda name: self._held.get(name, 0))
            queue = self._waiting[caller]
            amount, future = queue[0]
            if amount > self.capacity - self.used:
                return
            queue.popleft()
            if not queue:
                del self._waiting[caller]
            if future.cancelled():  # its task is being cancelled: ``take`` withdraws it
                continue
            self._held[caller] = self._held.get(caller, 0) + amount
            self.used += amount
            future.set_result(None)
