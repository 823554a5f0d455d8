"""`python -m benchmarks index` runs end to end (tiny sizes; the numbers are the bench's)."""

from __future__ import annotations

import json

import pytest

from benchmarks.__main__ import main
from benchmarks.index import readme_rows


@pytest.mark.usefixtures("spark")  # the bench joins the suite's shared session
def test_bench_index_reports_every_part(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["index", "--entries", "3000", "--batch", "600", "--repeat", "1"]
    argv += ["--table-rows", "2000", "--latency-ms", "5", "--master", "local[1]"]
    assert main([*argv, "--json"]) == 0

    output = capsys.readouterr().out.strip().splitlines()
    report = json.loads(output[-1])
    table = "\n".join(output[:-1])  # the table, then one JSON line
    assert (report["entries"], report["batch"], report["present"]) == (3000, 600, 300)
    assert report["master"] == "local[1]"
    # Cold means cold: none of the copy's pages were in the page cache before its lookup.
    assert report["cold_resident_fraction"] == 0.0
    assert report["s3_latency_ms"] == 5.0
    assert "moto" in report["s3_server"]
    # A size, a tail read and one ranged read of the blocks.
    assert report["s3_cold_requests"] == 3
    assert report["rocksdb_config"]["bloom_filter_bits_per_key"] == 10
    assert report["rocksdb_config"]["block_cache_bytes"] > report["rocksdb_bytes_per_entry"] * 3000
    assert report["rocksdb_config"]["cache_index_and_filter_blocks"] is True
    assert (report["table_rows"], report["tag_keys"]) == (2000, 2)
    # The scan opens every base file (how many depends on the session's parallelism).
    assert report["point_index_files"] == 1 < report["point_scan_files"]
    assert report["point_index_runs_s"] == [report["point_index_s"]]  # --repeat 1: one round
    assert report["point_scan_runs_s"] == [report["point_scan_s"]]
    for key in (
        "warm_ms",
        "cold_ms",
        "s3_cold_ms",
        "rocksdb_ms",
        "rocksdb_convert_ms",
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
    assert "warm lookup (ms)" in table
    assert "tagging an upsert of 2 keys" in table

    # Quoted figures are references with a source, printed apart, never measured values.
    assert "hudi_hfile_ms" not in report
    references = report["references"]
    assert references and all(set(ref) == {"what", "figure", "source"} for ref in references)
    measured, quoted = table.split("References (quoted, not measured)")
    for reference in references:
        assert reference["figure"] in quoted
        assert reference["figure"] not in measured
    rows = readme_rows(report)
    assert rows and all(len(row) == 4 for row in rows)
    for _, ours, baseline, ratio in rows:
        assert "Hudi" not in ours + baseline + ratio
        assert not any(ref["figure"] in ours + baseline + ratio for ref in references)
    assert "point query by key (median of 1, taking turns first)" in table


def test_bench_index_rejects_bad_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["index", "--entries", "0"])
    assert exit_info.value.code == 2
    assert "--entries" in capsys.readouterr().err


def test_bench_index_rejects_negative_latency(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["index", "--latency-ms", "-1"])
    assert exit_info.value.code == 2
    assert "--latency-ms: must be >= 0, got -1" in capsys.readouterr().err
