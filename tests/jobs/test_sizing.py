"""File sizing plans (pure Python, no Spark)."""

from __future__ import annotations

from tidemark.jobs.sizing import average_record_size, plan_writes
from tidemark.table.files.view import BaseFile
from tidemark.table.metadata.commit import CommitMetadata, WriteStat


def _file(file_id: str, size: int, partition: str = "p") -> BaseFile:
    return BaseFile(partition, file_id, "20240101000000000", f"{partition}/{file_id}.parquet", size)


def test_inserts_top_up_small_files_before_new_groups() -> None:
    plan = plan_writes(
        touched_files=[],
        inserts_per_partition={"p": 25},
        small_files=[_file("big-small", 80), _file("tiny", 10)],
        record_size=10,
        target_file_bytes=100,
    )
    shares = plan.inserts["p"]
    buckets = [plan.buckets[i] for i in shares.bucket_ids]
    assert [b.file_id for b in buckets[:2]] == ["tiny", "big-small"]
    assert all(b.base is None for b in buckets[2:])
    # 9 + 2 records top up the small files, the 14 left need two new files of 10 records
    assert len(buckets) == 4
    assert shares.cumulative == (9 / 25, 11 / 25, 18 / 25, 1.0)
    assert shares.bucket_for(0.0) == shares.bucket_ids[0]
    assert shares.bucket_for(0.999) == shares.bucket_ids[-1]


def test_updates_get_one_bucket_per_file_group_and_record_size_from_history() -> None:
    touched = _file("a", 50)
    plan = plan_writes(
        touched_files=[touched, touched],
        inserts_per_partition={},
        small_files=[],
        record_size=10,
        target_file_bytes=100,
    )
    assert len(plan.buckets) == 1 and plan.buckets[0].prev_commit == touched.instant
    stat = WriteStat("f", "p/f", "null", 10, 0, 0, 10, 2_000, 2_000, "p")
    history = [CommitMetadata({"p": [stat]}, "UPSERT")]
    assert average_record_size(history) == 200
    assert average_record_size([]) == 1024
