"""The record-level index storage engine: sorted shard files, deltas by the timeline, the
block cache and the bootstrap's entry points. The index service serves it; Spark jobs build
and stage through it. Byte layout and visibility: docs/record-index.md."""
