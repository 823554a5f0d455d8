"""The latest slices tagging reads keys from (pure Python, no Spark)."""

from __future__ import annotations

from tidemark.jobs.tagging import LatestSlices
from tidemark.table.files.view import BaseFile, FileSlice


def _base(partition: str, file_id: str) -> BaseFile:
    return BaseFile(partition, file_id, "20240101000000000", f"{partition}/{file_id}.parquet", 9)


def test_base_files_are_those_of_plain_and_merged_slices_in_the_views_order() -> None:
    slices = LatestSlices(
        files=[_base("p", "b"), _base("q", "a")],
        merged=[
            FileSlice("p", "a", _base("p", "a"), ()),
            FileSlice("p", "logs-only", None, ()),
        ],
    )
    found = [(f.partition_path, f.file_id) for f in slices.base_files()]
    assert found == [("p", "a"), ("p", "b"), ("q", "a")]
