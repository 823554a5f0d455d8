"""The size-based strategy over random file-size layouts: hypothesis checks the plan's
properties and compares it with a plain transcription of Hudi's packing loop."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidemark.clustering.strategy import (
    FileSlices,
    PartitionFilter,
    PlanOptions,
    plan_clustering,
    synthetic_slices,
    time_plan,
)
from tidemark.errors import InvalidArgumentError
from tidemark.table.files.slices import LogFile
from tidemark.table.files.view import BaseFile, FileSlice
from tidemark.table.logfiles.file_names import LogFileName

PARTITIONS = ["2024/01/01", "2024/01/02", "2024/02/01", "eu", "us", ""]


@st.composite
def layouts(draw: st.DrawFn) -> tuple[FileSlices, PlanOptions, set[tuple[str, str]]]:
    count = draw(st.integers(0, 60))
    partitions = draw(st.lists(st.sampled_from(PARTITIONS), min_size=count, max_size=count))
    sizes = draw(st.lists(st.integers(1, 1000), min_size=count, max_size=count))
    file_ids = [f"fg-{i}" for i in range(count)]
    slices = FileSlices(
        np.array(partitions, dtype=object),
        np.array(file_ids, dtype=object),
        np.array(
            [
                f"{p}/{f}_0-1-0_20240101000000000.parquet"
                for p, f in zip(partitions, file_ids, strict=True)
            ],
            dtype=object,
        ),
        np.array(sizes, dtype=np.int64),
    )
    selection = draw(
        st.sampled_from(
            [
                PartitionFilter("all"),
                PartitionFilter.recent(1),
                PartitionFilter.recent(3),
                PartitionFilter.regex(r"2024/01/.*"),
                PartitionFilter.listed(["us", "eu", "missing"]),
            ]
        )
    )
    options = PlanOptions(
        partitions=selection,
        target_file_bytes=draw(st.integers(1, 1500)),
        small_file_limit_bytes=draw(st.integers(1, 1200)),
        max_bytes_per_group=draw(st.integers(1, 3000)),
        max_groups=draw(st.integers(1, 8)),
    )
    busy_indexes = draw(st.sets(st.integers(0, max(count - 1, 0)), max_size=count))
    busy = {(partitions[i], file_ids[i]) for i in busy_indexes if i < count}
    return slices, options, busy


def hudi_model(
    slices: FileSlices, options: PlanOptions, busy: set[tuple[str, str]]
) -> list[list[str]]:
    """Hudi's loop, transcribed plainly: per selected partition, eligible slices sorted by
    size (descending, stable), a new group when the next file would pass the max, groups of
    one skipped, at most max_groups groups."""
    names = sorted(set(slices.partitions.tolist()))
    groups: list[list[str]] = []
    for partition in options.partitions.select(names):
        eligible = [
            (int(size), file_id)
            for p, file_id, size in zip(
                slices.partitions, slices.file_ids, slices.sizes, strict=True
            )
            if p == partition and size < options.small_file_limit_bytes and (p, file_id) not in busy
        ]
        eligible.sort(key=lambda item: -item[0])
        current: list[str] = []
        total = 0
        for size, file_id in eligible:
            if total + size > options.max_bytes_per_group and current:
                groups.append(current)
                current, total = [], 0
            current.append(file_id)
            total += size
        groups.append(current)
    return [group for group in groups if len(group) > 1][: options.max_groups]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layouts())
def test_plan_properties(layout: tuple[FileSlices, PlanOptions, set[tuple[str, str]]]) -> None:
    slices, options, busy = layout
    outcome = plan_clustering(slices, options, busy)
    expected = hudi_model(slices, options, busy)
    if outcome.plan is None:
        assert expected == []
        assert outcome.reason
        return
    plan = outcome.plan
    assert [[s.file_id for s in group.slices] for group in plan.groups] == expected
    size_of = dict(zip(slices.file_ids.tolist(), slices.sizes.tolist(), strict=True))
    selected = set(options.partitions.select(sorted(set(slices.partitions.tolist()))))
    seen: list[str] = []
    for group in plan.groups:
        assert len(group.slices) >= 2
        assert group.size_bytes <= options.max_bytes_per_group
        assert group.num_output_file_groups == max(
            1, math.ceil(group.size_bytes / options.target_file_bytes)
        )
        assert [s.size_bytes for s in group.slices] == sorted(
            (s.size_bytes for s in group.slices), reverse=True
        )
        for piece in group.slices:
            assert piece.partition_path in selected
            assert piece.size_bytes == size_of[piece.file_id] < options.small_file_limit_bytes
            assert (piece.partition_path, piece.file_id) not in busy
            seen.append(piece.file_id)
    assert len(seen) == len(set(seen))
    assert len(plan.groups) <= options.max_groups
    assert plan.strategy.target_file_bytes == options.target_file_bytes


def test_partition_filters_pick_in_hudis_order() -> None:
    names = ["2024/01/01", "2024/01/02", "2024/02/01", "eu"]
    assert PartitionFilter.recent(2).select(names) == ["eu", "2024/02/01"]
    assert PartitionFilter.regex(r"2024/0\d/01").select(names) == ["2024/01/01", "2024/02/01"]
    assert PartitionFilter.regex(r"2024").select(names) == []
    assert PartitionFilter.listed(["eu", "nope", "2024/01/01"]).select(names) == [
        "eu",
        "2024/01/01",
    ]


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: PartitionFilter.regex("("), "partitions"),
        (lambda: PartitionFilter.recent(0), "partitions"),
        (lambda: PartitionFilter.listed([]), "partitions"),
        (lambda: PlanOptions(target_file_bytes=0), "target_file_bytes"),
        (lambda: PlanOptions(max_groups=0), "max_groups"),
        (lambda: PlanOptions(small_file_limit_bytes=-1), "small_file_limit_bytes"),
        (lambda: PlanOptions(layout="zorder"), "sort_columns"),
        (lambda: PlanOptions(sort_columns=("a", "a")), "sort_columns"),
    ],
)
def test_bad_options_name_their_field(build: object, field: str) -> None:
    with pytest.raises(InvalidArgumentError) as error:
        build()  # type: ignore[operator]
    assert error.value.field == field


def test_reasons_when_there_is_nothing_to_cluster() -> None:
    slices = synthetic_slices(50, partitions=2)
    assert (
        plan_clustering(
            FileSlices(
                *(a[:0] for a in (slices.partitions, slices.file_ids, slices.paths, slices.sizes))
            ),
            PlanOptions(),
        ).reason
        == "the table has no file groups"
    )
    assert (
        "no partition matches regex:x"
        in plan_clustering(slices, PlanOptions(partitions=PartitionFilter.regex("x"))).reason
    )
    assert (
        "below the small-file limit"
        in plan_clustering(slices, PlanOptions(small_file_limit_bytes=1)).reason
    )
    every = set(zip(slices.partitions.tolist(), slices.file_ids.tolist(), strict=True))
    assert "pending plan or a pending write" in plan_clustering(slices, PlanOptions(), every).reason


def test_time_plan_plans_100k_slices() -> None:
    slices = synthetic_slices(100_000)
    outcome = plan_clustering(slices, PlanOptions())
    assert outcome.plan is not None and len(outcome.plan.groups) == 30
    assert time_plan(1_000) > 0


def _slice(file_id: str, size: int, log_sizes: list[int], base: bool = True) -> FileSlice:
    partition, instant = "eu", "20240101000000000"
    logs = tuple(
        LogFile(
            partition,
            LogFileName(file_id, instant, version, "0-1-0"),
            f"{partition}/.{file_id}_{instant}.log.{version}_0-1-0",
            log_size,
        )
        for version, log_size in enumerate(log_sizes, start=1)
    )
    base_file = BaseFile(
        partition, file_id, instant, f"{partition}/{file_id}_0-1-0_{instant}.parquet", size
    )
    return FileSlice(partition, file_id, base_file if base else None, logs)


def test_merge_on_read_slices_are_planned_with_their_logs() -> None:
    """A slice's logs count in its size and go into the plan; a group of logs only (no
    base file, which hudi-rs does not read) is left out."""
    slices = [
        _slice("fg-a", 100, [10, 20]),
        _slice("fg-b", 200, []),
        _slice("fg-c", 0, [50], base=False),
    ]
    outcome = plan_clustering(FileSlices.from_file_slices(slices), PlanOptions())
    assert outcome.plan is not None
    (group,) = outcome.plan.groups
    by_id = {piece.file_id: piece for piece in group.slices}
    assert set(by_id) == {"fg-a", "fg-b"}
    assert by_id["fg-a"].logs == tuple(log.path for log in slices[0].logs)
    assert (by_id["fg-a"].size_bytes, by_id["fg-a"].log_bytes) == (130, 30)
    assert (by_id["fg-b"].logs, by_id["fg-b"].size_bytes) == ((), 200)
