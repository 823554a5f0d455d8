"""Run ``tidemark serve`` as a child process and ask its health service, as a deployment's
probe would."""

from __future__ import annotations

import re
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def serve_and_check_health(command: Sequence[str], cwd: Path) -> str:
    """Start ``command`` (a ``tidemark serve ... --port 0``), check that its health answers
    SERVING, stop it with SIGTERM; returns its stderr. The command must exit 0."""
    process = subprocess.Popen(
        command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        match = re.fullmatch(r"listening on 127\.0\.0\.1:(\d+)\n", process.stdout.readline())
        assert match, "serve did not print its address"
        with grpc.insecure_channel(f"127.0.0.1:{match.group(1)}") as channel:
            response = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=10
            )
        assert response.status == health_pb2.HealthCheckResponse.SERVING
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, stderr
    return stderr
