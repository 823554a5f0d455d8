"""Generated protobuf and gRPC code (from protos/, by scripts/gen_protos.py); never edited."""
