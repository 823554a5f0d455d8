"""``tidemark serve`` as a real subprocess: start, health check, SIGTERM, bad configs."""

from __future__ import annotations

import argparse
import gc
import socket
import subprocess
import sys
from pathlib import Path

from serving import serve_and_check_health

from tidemark.commands.serve import tune_gc, with_default_ports

REPO = Path(__file__).resolve().parents[2]
SERVE = [sys.executable, "-m", "tidemark.cli", "serve"]


def run_serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SERVE, *args], cwd=REPO, capture_output=True, text=True, timeout=60, check=False
    )


def test_serve_all_answers_health_and_exits_zero_on_sigterm() -> None:
    stderr = serve_and_check_health(
        [*SERVE, "all", "--port", "0", "--metrics-port", "0", "--grace-period", "5"], REPO
    )
    assert '"event": "stopped"' in stderr


def assert_one_line_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert result.returncode != 0
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def test_unknown_service_exits_non_zero_with_one_line() -> None:
    assert_one_line_error(run_serve("bogus"), "unknown service 'bogus'")


def test_port_in_use_exits_non_zero_with_one_line() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = run_serve(
            "all", "--port", str(port), "--metrics-port", "0", "--log-level", "error"
        )
    assert_one_line_error(result, f"port {port} is already in use")


def test_metrics_port_in_use_is_named_in_one_line() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = run_serve("index", "--port", "0", "--metrics-port", str(port))
    assert_one_line_error(result, f"metrics port {port} is already in use", "--metrics-port")


def test_each_service_has_ports_of_its_own_unless_set() -> None:
    chosen = {
        service: with_default_ports(
            argparse.Namespace(service=service, port=None, metrics_port=None), {}
        )
        for service in ("marker", "index", "planner")
    }
    ports = [(args.port, args.metrics_port) for args in chosen.values()]
    assert len({port for pair in ports for port in pair}) == 6
    by_flag = argparse.Namespace(service="index", port=7000, metrics_port=None)
    by_env = with_default_ports(by_flag, {"TIDEMARK_METRICS_PORT": "7001"})
    assert (by_env.port, by_env.metrics_port) == (7000, None)


def test_unreadable_tls_path_exits_non_zero_with_one_line(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.pem")
    result = run_serve("all", "--port", "0", "--tls-cert", missing, "--tls-key", missing)
    assert_one_line_error(result, "tls_cert_path", missing)


def test_bad_gc_threshold_exits_non_zero_with_one_line() -> None:
    assert_one_line_error(
        run_serve("all", "--port", "0", "--gc-young-threshold", "0"), "gc_young_threshold"
    )


def test_bad_replica_settings_exit_non_zero_with_one_line() -> None:
    assert_one_line_error(
        run_serve("all", "--port", "0", "--advertise-address", "pod-0.markers"),
        "advertise_address",
        "HOST:PORT",
    )
    assert_one_line_error(
        run_serve("all", "--port", "0", "--max-connection-age-s", "0"), "max_connection_age_s"
    )


def test_tune_gc_sets_only_the_young_generation() -> None:
    before = gc.get_threshold()
    try:
        tune_gc(12_345)
        assert gc.get_threshold() == (12_345, *before[1:])
    finally:
        gc.set_threshold(*before)


def test_workers_of_a_service_that_keeps_state_in_memory_are_refused() -> None:
    assert_one_line_error(
        run_serve("marker", "--port", "0", "--workers", "2"),
        "workers: marker must run in one process per port (got 2)",
    )
