"""``Closing``: a resource a ``with`` block closes (a server, a child process, a proxy), so
each such class writes ``close()`` alone and not the same ``__enter__``/``__exit__`` pair."""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self


class Closing(ABC):
    """``with resource:`` closes it at the end of the block, whatever happened in it."""

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
