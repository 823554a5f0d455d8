"""The record-level index: sorted shard files per table, read and merged by ``RecordIndex``.

Format and layout: docs/record-index.md.
"""
