"""The committed generated code must match what scripts/gen_protos.py produces now."""

from __future__ import annotations

import shutil
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


def buf(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    executable = Path(sys.executable).parent / "buf"
    return subprocess.run([str(executable), *arguments], cwd=cwd, capture_output=True, text=True)


def test_contracts_stay_wire_compatible_with_the_kept_image(tmp_path: Path) -> None:
    """``make lint``'s check: protos/ against protos/image.binpb passes, and a field
    renumbered in a copy is reported as a breaking change."""
    image = str(ROOT / "protos" / "image.binpb")
    result = buf("breaking", "--against", image, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    shutil.copytree(ROOT / "protos", tmp_path / "protos")
    shutil.copy(ROOT / "buf.yaml", tmp_path / "buf.yaml")
    common = tmp_path / "protos" / "tidemark" / "common" / "v1" / "common.proto"
    text = common.read_text()
    assert "string base_path = 1;" in text
    common.write_text(text.replace("string base_path = 1;", "string base_path = 9;"))
    broken = buf("breaking", "--against", image, cwd=tmp_path)
    assert broken.returncode != 0
    assert "base_path" in broken.stdout + broken.stderr
