"""The clustering layouts by name, as the CLI spells them and the planner's messages carry
them: one map that the planner client and the planner service share."""

from __future__ import annotations

from tidemark.proto.planner.v1 import planner_service_pb2 as pb

LAYOUTS: dict[str, pb.Layout] = {
    "linear": pb.LAYOUT_LINEAR,
    "zorder": pb.LAYOUT_ZORDER,
    "hilbert": pb.LAYOUT_HILBERT,
}
LAYOUT_NAMES = {value: name for name, value in LAYOUTS.items()}
