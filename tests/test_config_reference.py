"""docs/configuration.md's settings tables are generated from the config definitions:
this fails when they are stale, or when a setting has no docstring to document it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_configuration_reference_matches_the_config_definitions() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "config_reference.py"), "--check"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
