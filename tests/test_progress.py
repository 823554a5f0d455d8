"""Stage progress off a terminal (a log file, a pipe): one plain line per stage, written
as the stage ends rather than when the job ends."""

from __future__ import annotations

import io

from rich.console import Console

from tidemark.commands.progress import StageProgress


def test_each_finished_stage_is_a_line_in_the_log_at_once() -> None:
    log = io.StringIO()
    with StageProgress(Console(file=log), transient=True) as progress:
        progress.stage_started("build record index")
        assert log.getvalue() == ""
        progress.stage_finished("build record index", 2.04)
        assert log.getvalue() == "build record index: 2.0 s\n"
        progress.stage_started("run clustering")
        progress.stage_finished("run clustering", 0.26)
    assert log.getvalue().splitlines() == ["build record index: 2.0 s", "run clustering: 0.3 s"]
