"""Per-method Prometheus metrics, scraped from the real metrics HTTP port."""

from __future__ import annotations

import itertools
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.parser import text_string_to_metric_families

from tidemark.config import ServerConfig
from tidemark.rpc.metrics import MetricsEndpoint
from tidemark.rpc.registry import resolve_services
from tidemark.rpc.server import RunningServer, build_server

from .certs import Authority
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


def expiry(certificate: str) -> float:
    return x509.load_pem_x509_certificate(
        Path(certificate).read_bytes()
    ).not_valid_after_utc.timestamp()


def test_a_tls_server_exports_its_memory_limit_and_when_its_certificate_expires(
    tmp_path: Path,
) -> None:
    authority = Authority(tmp_path)
    pair = authority.issue("server", server=True)
    config = ServerConfig(port=0, metrics_port=0, tls_cert_path=pair.cert, tls_key_path=pair.key)
    server = build_server(config, resolve_services("planner"))
    try:
        samples = scrape(server.metrics_port)
        assert samples[("tidemark_memory_limit_bytes", frozenset())] > 0  # +Inf: no limit
        first = samples[("tidemark_tls_certificate_expiry_timestamp_seconds", frozenset())]
        assert first == expiry(pair.cert)
        time.sleep(1.1)  # certificate times are in whole seconds
        renewed = authority.issue("server", server=True)  # the same files, a later expiry
        samples = scrape(server.metrics_port)
        later = samples[("tidemark_tls_certificate_expiry_timestamp_seconds", frozenset())]
        assert later == expiry(renewed.cert) > first
    finally:
        server.stop(0)


def test_the_metrics_port_is_free_again_once_closed() -> None:
    """The endpoint serves its own registry and gives the port back on close, so a
    restarted service can bind it again."""
    registry = CollectorRegistry()
    Counter("tidemark_probe", "a probe", registry=registry).inc(3)
    endpoint = MetricsEndpoint(registry, "127.0.0.1", 0)
    assert scrape(endpoint.port)[("tidemark_probe_total", frozenset())] == 3.0
    endpoint.close()
    with pytest.raises(urllib.error.URLError):
        scrape(endpoint.port)
    again = MetricsEndpoint(CollectorRegistry(), "127.0.0.1", endpoint.port)
    again.close()
