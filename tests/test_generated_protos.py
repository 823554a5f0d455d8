"""The committed generated code must match what scripts/gen_protos.py produces now."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_generated_code_is_fresh(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_protos.py"), "--out", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    fresh = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*_pb2*"))
    generated = (ROOT / "tidemark").rglob("*_pb2*")
    committed = sorted(p.relative_to(ROOT) for p in generated if p.suffix in {".py", ".pyi"})
    assert fresh == committed, "generated files differ: run `make protos`"
    stale = [str(p) for p in fresh if (tmp_path / p).read_bytes() != (ROOT / p).read_bytes()]
    assert not stale, f"stale generated code, run `make protos`: {stale}"


def test_buf_lint_passes() -> None:
    buf = Path(sys.executable).parent / "buf"
    result = subprocess.run([str(buf), "lint"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
