"""Generate Python messages, .pyi stubs and gRPC stubs from protos/ into tidemark/proto/.

Run: python scripts/gen_protos.py [--out DIR]. protoc names Python modules after the proto
packages (``tidemark.proto.marker.v1``); the generated code lives in its own namespace,
``tidemark.proto.marker.v1``, so its imports and module names are moved there. The proto
packages, and so everything on the wire, stay as they are. The generated packages are
committed; tests/test_generated_protos.py fails when they are stale.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"
NAMESPACE = ("tidemark", "proto")

# Python references to a generated module: import lines, the module name given to
# protobuf's builder, and (in stubs) annotations. Never the serialized descriptor bytes.
_IMPORT_LINE = re.compile(r"^(from|import) tidemark\.(?=\w+\.v1\b)", re.MULTILINE)
_BUILDER_MODULE = re.compile(r"(BuildTopDescriptorsAndMessages\(DESCRIPTOR, ')tidemark\.")
_STUB_REFERENCE = re.compile(r"\btidemark\.(?=\w+\.v1\b)")


def proto_files() -> list[Path]:
    return sorted(PROTO_ROOT.rglob("*.proto"))


def _move_to_namespace(source: str, *, stub: bool) -> str:
    prefix = ".".join(NAMESPACE)
    if stub:
        return _STUB_REFERENCE.sub(f"{prefix}.", source)
    source = _IMPORT_LINE.sub(rf"\1 {prefix}.", source)
    return _BUILDER_MODULE.sub(rf"\1{prefix}.", source)


def generate(out_dir: Path) -> list[Path]:
    """Run protoc once for every proto; returns the generated files under ``out_dir``."""
    grpc_include = Path(protoc.__file__).parent / "_proto"
    plugin = Path(sys.executable).parent / "protoc-gen-mypy_grpc"
    with tempfile.TemporaryDirectory() as scratch:
        args = [
            "grpc_tools.protoc",
            f"-I{PROTO_ROOT}",
            f"-I{grpc_include}",
            f"--python_out={scratch}",
            f"--pyi_out={scratch}",
            f"--grpc_python_out={scratch}",
            f"--plugin=protoc-gen-mypy_grpc={plugin}",
            f"--mypy_grpc_out={scratch}",
            *(str(path.relative_to(PROTO_ROOT)) for path in proto_files()),
        ]
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed")
        generated: list[Path] = []
        for proto in proto_files():
            package = proto.parent.relative_to(PROTO_ROOT).parts[1:]
            target = out_dir.joinpath(*NAMESPACE, *package)
            target.mkdir(parents=True, exist_ok=True)
            for depth in range(len(NAMESPACE) + 1, len(NAMESPACE) + len(package) + 1):
                init = out_dir.joinpath(*(NAMESPACE + package)[:depth]) / "__init__.py"
                if not init.exists():
                    init.touch()
            source_dir = Path(scratch) / proto.parent.relative_to(PROTO_ROOT)
            for source in sorted(source_dir.glob(f"{proto.stem}_pb2*")):
                text = _move_to_namespace(source.read_text(), stub=source.suffix == ".pyi")
                (target / source.name).write_text(text)
                generated.append(target / source.name)
    return generated


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT)
    args = parser.parse_args()
    for path in generate(args.out):
        print(path.relative_to(args.out))


if __name__ == "__main__":
    main()
