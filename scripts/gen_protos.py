"""Generate Python messages, .pyi stubs and gRPC stubs from protos/ into the repo root.

Run: python scripts/gen_protos.py [--out DIR]. Generated packages (tidemark/common/v1,
tidemark/marker/v1, ...) are committed; tests/test_generated_protos.py fails when stale.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"


def proto_files() -> list[Path]:
    return sorted(PROTO_ROOT.rglob("*.proto"))


def generate(out_dir: Path) -> list[Path]:
    """Run protoc once for every proto; returns the generated files."""
    grpc_include = Path(protoc.__file__).parent / "_proto"
    plugin = Path(sys.executable).parent / "protoc-gen-mypy_grpc"
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"-I{grpc_include}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        f"--plugin=protoc-gen-mypy_grpc={plugin}",
        f"--mypy_grpc_out={out_dir}",
        *(str(path.relative_to(PROTO_ROOT)) for path in proto_files()),
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    generated: list[Path] = []
    for proto in proto_files():
        package = proto.parent.relative_to(PROTO_ROOT)
        for depth in range(2, len(package.parts) + 1):
            (out_dir.joinpath(*package.parts[:depth]) / "__init__.py").touch()
        generated += sorted((out_dir / package).glob(f"{proto.stem}_pb2*"))
    return generated


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT)
    args = parser.parse_args()
    for path in generate(args.out):
        print(path.relative_to(args.out))


if __name__ == "__main__":
    main()
