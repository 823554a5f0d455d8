"""``tidemark serve`` in a child process: for benchmarks and crash tests that need a real
server they can SIGTERM or kill -9, and for the workers of ``tidemark serve --workers N``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import IO

from tidemark.closing import Closing
from tidemark.errors import UnavailableError

LISTENING = re.compile(r"listening on (\S+):(\d+)")
STOP_TIMEOUT_S = 30.0
FREE_PORTS = ("--port", "0", "--metrics-port", "0")


class ServeProcess(Closing):
    """Starts ``tidemark serve SERVICE --port 0 --metrics-port 0`` and waits for its
    ``listening on`` line: free ports, so several such processes run side by side."""

    def __init__(
        self,
        service: str,
        *,
        env: Mapping[str, str] | None = None,
        args: Sequence[str] = (),
        show_logs: bool = False,
        log_file: IO[str] | None = None,
    ) -> None:
        """``args`` come after the ports (a later ``--port`` wins); the child's logs go
        to ``log_file`` if given, else to this process's stderr with ``show_logs``, else
        nowhere."""
        command = [sys.executable, "-m", "tidemark.cli", "serve", service, *FREE_PORTS, *args]
        self.process = subprocess.Popen(
            command,
            env={**os.environ, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=log_file or (None if show_logs else subprocess.DEVNULL),
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        match = LISTENING.search(line)
        if match is None:
            self.kill()
            raise UnavailableError(f"tidemark serve {service} did not start: {line!r}")
        self.address = f"127.0.0.1:{match.group(2)}"
        self.pid = self.process.pid

    def kill(self) -> None:
        """kill -9: no graceful shutdown, as a crashed pod."""
        self.process.kill()
        self.process.wait()

    def close(self) -> None:
        """SIGTERM: graceful shutdown."""
        self.process.terminate()
        self.process.wait(timeout=STOP_TIMEOUT_S)
