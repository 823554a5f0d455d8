"""`tidemark bench index` runs end to end (tiny sizes; the numbers belong to the benchmark)."""

from __future__ import annotations

import json

import pytest

from tidemark.cli import main


@pytest.mark.usefixtures("spark")  # the bench joins the suite's shared session
def test_bench_index_reports_every_part(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bench", "index", "--entries", "3000", "--batch", "600", "--repeat", "1"]
    assert main([*argv, "--table-rows", "2000", "--json"]) == 0

    output = capsys.readouterr().out.strip().splitlines()
    report = json.loads(output[-1])
    assert (report["entries"], report["batch"], report["present"]) == (3000, 600, 300)
    assert (report["table_rows"], report["tag_keys"]) == (2000, 2)
    # The scan opens every base file (how many depends on the session's parallelism).
    assert report["point_index_files"] == 1 < report["point_scan_files"]
    assert report["point_index_runs_s"] == [report["point_index_s"]]  # --repeat 1: one round
    assert report["point_scan_runs_s"] == [report["point_scan_s"]]
    for key in (
        "warm_ms",
        "cold_ms",
        "rocksdb_ms",
        "bytes_per_entry",
        "rocksdb_bytes_per_entry",
        "parquet_bytes_per_entry",
        "service_keys_per_s",
        "service_keys_per_s_one_client",
        "service_keys_per_s_workers",
        "tag_index_s",
        "tag_join_s",
        "point_index_s",
        "point_scan_s",
    ):
        assert report[key] > 0, key
    assert set(report["service_keys_per_s_by_batch"]) == {"1000", "3000"}
    assert set(report["service_keys_per_s_one_client_by_batch"]) == {"1000", "3000"}
    assert "warm lookup (ms)" in "\n".join(output)
    assert "tagging an upsert of 2 keys" in "\n".join(output)
    assert "point query by key (median of 1, taking turns first)" in "\n".join(output)


def test_bench_index_rejects_bad_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "index", "--entries", "0"])
    assert exit_info.value.code == 2
    assert "--entries" in capsys.readouterr().err
