"""The ``tidemark`` namespace as the wheel installs it, for the static tools that find
modules by walking folders (mypy, import-linter) and cannot follow setuptools' package-dir
mapping of ``tidemark.jobs`` onto ``spark_jobs/`` and ``tidemark.services`` onto
``services/``.

``python scripts/namespace_tree.py mypy|lint-imports [ARGS]`` assembles the namespace under
``build/namespace/`` (gitignored; links to the real folders there, none in the repository's
own tree), runs the tool over it, and prints its report with every path
mapped back to the file in the repository."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "tidemark"
SHADOW = ROOT / "build" / "namespace"


def mapped_folders(root: Path) -> dict[str, str]:
    """pyproject.toml's ``[tool.setuptools.package-dir]``: subpackage -> folder."""
    config = tomllib.loads((root / "pyproject.toml").read_text())
    return dict(config["tool"]["setuptools"]["package-dir"])


def assemble(root: Path, dest: Path, *, copy: bool = False) -> Path:
    """``dest/tidemark`` holding the package's entries and the mapped folders under their
    installed names: links to ``root``'s folders, or copies of them with ``copy``."""
    package = dest / PACKAGE
    if package.exists():
        shutil.rmtree(package)
    package.mkdir(parents=True)
    entries = {entry.name: entry for entry in (root / PACKAGE).iterdir()}
    for name, folder in mapped_folders(root).items():
        entries[name.removeprefix(f"{PACKAGE}.")] = root / folder
    for name, source in entries.items():
        if source.name == "__pycache__":
            continue
        target = package / name
        if not copy:
            target.symlink_to(source)
        elif source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, target)
    return package


def real_path(reported: str, root: Path, dest: Path) -> str:
    """A path in the assembled tree (absolute, or relative to ``root`` as mypy prints it),
    as the file's path in the repository."""
    spellings = [dest] + ([dest.relative_to(root)] if dest.is_relative_to(root) else [])
    for spelling in spellings:
        for name, folder in mapped_folders(root).items():
            installed = f"{spelling / PACKAGE / name.removeprefix(f'{PACKAGE}.')}/"
            reported = reported.replace(installed, f"{folder}/")
        reported = reported.replace(f"{spelling}/", "")
    return reported


def run(tool: str, args: list[str]) -> int:
    package = assemble(ROOT, SHADOW)
    binary = str(Path(sys.executable).parent / tool)
    command = [binary, *args]
    if tool == "mypy":
        command += [str(package), "benchmarks", "scripts", "tests"]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(SHADOW), "MYPYPATH": str(SHADOW)}
    cwd = ROOT
    if tool == "lint-imports":  # its contracts from pyproject.toml, its modules found first
        cwd = SHADOW
        (SHADOW / "pyproject.toml").unlink(missing_ok=True)
        (SHADOW / "pyproject.toml").symlink_to(ROOT / "pyproject.toml")
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    sys.stdout.write(real_path(result.stdout, ROOT, SHADOW))
    sys.stderr.write(real_path(result.stderr, ROOT, SHADOW))
    return result.returncode


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in {"mypy", "lint-imports"}:
        raise SystemExit("usage: namespace_tree.py mypy|lint-imports [ARGS]")
    raise SystemExit(run(sys.argv[1], sys.argv[2:]))
