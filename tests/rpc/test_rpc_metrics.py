"""Per-method Prometheus metrics, scraped from the real metrics HTTP port."""

from __future__ import annotations

import itertools
import urllib.request
from collections.abc import Callable

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tidemark.rpc.server import RunningServer

from .probe import Unary


def scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_requests_latency_and_errors_are_counted_per_method(
    server: RunningServer, unary: Unary, method_path: Callable[[str], str]
) -> None:
    service = method_path("Echo").strip("/").rpartition("/")[0]
    for _ in range(2):
        unary("Echo")(b"x", timeout=10)
    with pytest.raises(grpc.RpcError):
        unary("Fail")(b"NotFoundError", timeout=10)
    with pytest.raises(grpc.RpcError):
        unary("Crash")(b"", timeout=10)

    samples = scrape(server.metrics_port)

    def value(name: str, **labels: str) -> float:
        labelled = {"grpc_type": "unary", "grpc_service": service, **labels}
        return samples[(name, frozenset(labelled.items()))]

    assert value("grpc_server_started_total", grpc_method="Echo") == 2
    assert value("grpc_server_handled_total", grpc_method="Echo", grpc_code="OK") == 2
    assert value("grpc_server_handled_total", grpc_method="Fail", grpc_code="NOT_FOUND") == 1
    assert value("grpc_server_handled_total", grpc_method="Crash", grpc_code="INTERNAL") == 1
    assert value("grpc_server_handling_seconds_count", grpc_method="Echo") == 2
    # buckets are cumulative up to +Inf, which holds every call; the sum is their time
    buckets = sorted(
        (float(dict(labels)["le"]), count)
        for (name, labels), count in samples.items()
        if name == "grpc_server_handling_seconds_bucket" and ("grpc_method", "Echo") in labels
    )
    assert buckets[-1] == (float("inf"), 2)
    assert all(low[1] <= high[1] for low, high in itertools.pairwise(buckets))
    assert value("grpc_server_handling_seconds_sum", grpc_method="Echo") > 0
    process = {name: samples[(name, frozenset())] for name, labels in samples if not labels}
    assert process["process_resident_memory_bytes"] > 10 << 20
    assert process["process_open_fds"] > 0
    assert process["process_start_time_seconds"] > 0
    assert process["process_cpu_seconds_total"] > 0
