"""The progress of a long CLI job's stages on stderr: a spinner per stage on a terminal,
and elsewhere (a log file, a pipe, CI) one plain line per stage as it ends, flushed at
once, so a log shows how far a job got while it runs, not only when it ends."""

from __future__ import annotations

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from tidemark.closing import Closing


class StageProgress(Closing):
    """A spinner per stage, turned into its elapsed time when the stage ends (``transient``:
    removed once the job ends, for a command whose report lists the times itself); a plain
    ``<stage>: <seconds> s`` line per finished stage when the console is not a terminal.
    Shown from its creation until ``close()`` (the end of its ``with`` block)."""

    def __init__(self, console: Console, *, transient: bool = False) -> None:
        self._console = console
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=console,
            transient=transient,
            disable=not console.is_terminal,
        )
        self._tasks: dict[str, TaskID] = {}
        self._progress.start()

    def close(self) -> None:
        self._progress.stop()

    def stage_started(self, name: str) -> None:
        self._tasks[name] = self._progress.add_task(name, total=None)

    def stage_finished(self, name: str, seconds: float) -> None:
        self._progress.update(
            self._tasks[name], total=1, completed=1, description=f"{name} ({seconds:.1f} s)"
        )
        if not self._console.is_terminal:
            print(f"{name}: {seconds:.1f} s", file=self._console.file, flush=True)
