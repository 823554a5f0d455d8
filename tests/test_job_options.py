"""The jobs' option objects refuse a bad value when they are made, naming the field (no
Spark, no table: the value is checked before any work)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tidemark.errors import InvalidArgumentError
from tidemark.jobs.cluster_options import ClusterOptions
from tidemark.jobs.index_build_options import IndexBuildOptions
from tidemark.jobs.write_options import WriteOptions


@pytest.mark.parametrize(
    ("make", "field", "message"),
    [
        (lambda: WriteOptions(sort_mode="random"), "sort_mode", "unknown sort mode 'random'"),
        (lambda: WriteOptions(index="bloom"), "index", "unknown index 'bloom'"),
        (
            lambda: WriteOptions(markers="files"),  # type: ignore[arg-type]
            "markers",
            "unknown marker kind 'files'",
        ),
        (
            lambda: WriteOptions(on_pending_clustering="ignore"),
            "on_pending_clustering",
            "unknown policy 'ignore'",
        ),
        (lambda: WriteOptions(target_file_bytes=0), "target_file_bytes", "must be > 0, got 0"),
        (
            lambda: WriteOptions(small_file_limit_bytes=-1),
            "small_file_limit_bytes",
            "must be >= 0 (0: no small-file top-up), got -1",
        ),
        (lambda: WriteOptions(lock_lease_s=float("nan")), "lock_lease_s", "must be > 0"),
        (lambda: WriteOptions(lock_wait_s=-1), "lock_wait_s", "must be >= 0"),
        (lambda: WriteOptions(idempotency_key=" "), "idempotency_key", "printable characters"),
        (lambda: ClusterOptions(row_group_bytes=0), "row_group_bytes", "must be > 0, got 0"),
        (lambda: ClusterOptions(min_slice_bytes=-5), "min_slice_bytes", "must be > 0, got -5"),
        (lambda: ClusterOptions(lock_lease_s=0), "lock_lease_s", "must be > 0, got 0"),
        (lambda: ClusterOptions(lock_wait_s=-0.5), "lock_wait_s", "must be >= 0"),
        (
            lambda: ClusterOptions(markers="files"),  # type: ignore[arg-type]
            "markers",
            "unknown marker kind",
        ),
        (lambda: IndexBuildOptions(shards=0), "shards", "must be 1 to 10000, got 0"),
        (lambda: IndexBuildOptions(shards=10_001), "shards", "must be 1 to 10000, got 10001"),
        (lambda: IndexBuildOptions(lock_lease_s=0), "lock_lease_s", "must be > 0, got 0"),
        (lambda: IndexBuildOptions(lock_wait_s=-1), "lock_wait_s", "must be >= 0"),
    ],
)
def test_a_bad_option_is_refused_naming_its_field(
    make: Callable[[], object], field: str, message: str
) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        make()
    assert refused.value.field == field
    assert message in refused.value.message


def test_the_defaults_are_valid_and_the_options_frozen() -> None:
    for options in (WriteOptions(), ClusterOptions(), IndexBuildOptions()):
        with pytest.raises(AttributeError):
            options.lock_wait_s = 1.0  # type: ignore[misc]
    assert ClusterOptions(markers="service").with_marker_service("h:1").marker_service_address
