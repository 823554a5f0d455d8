"""Server runtime: health, reflection, graceful shutdown, bind errors."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from tidemark.config import ClientConfig, ServerConfig
from tidemark.errors import ConfigError
from tidemark.rpc.client import channel_for
from tidemark.rpc.registry import ServiceDefinition
from tidemark.rpc.server import RunningServer, build_server

from .probe import ProbeServicer, Unary

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def health_status(channel: grpc.Channel, service: str) -> int:
    stub = health_pb2_grpc.HealthStub(channel)
    return stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10).status


@pytest.fixture
def occupied_port() -> Iterator[int]:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def test_health_is_serving_overall_and_per_service(
    server: RunningServer, channel: grpc.Channel, definition: ServiceDefinition
) -> None:
    assert health_status(channel, "") == SERVING
    assert health_status(channel, definition.full_name) == SERVING


def test_health_turns_not_serving_on_graceful_shutdown(
    server: RunningServer, channel: grpc.Channel, definition: ServiceDefinition
) -> None:
    server.enter_graceful_shutdown()
    assert health_status(channel, "") == NOT_SERVING
    assert health_status(channel, definition.full_name) == NOT_SERVING


def test_reflection_lists_services(
    server: RunningServer, channel: grpc.Channel, definition: ServiceDefinition
) -> None:
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    (response,) = list(stub.ServerReflectionInfo(iter([request]), timeout=10))
    names = {service.name for service in response.list_services_response.service}
    assert names == {
        definition.full_name,
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
        "tidemark.common.v1.RoutesService",
    }


def test_stop_finishes_in_flight_call_then_closes_services(
    server: RunningServer, servicer: ProbeServicer, unary: Unary
) -> None:
    results: list[bytes] = []
    caller = threading.Thread(target=lambda: results.append(unary("Slow")(b"", timeout=60)))
    caller.start()
    assert servicer.slow_started.wait(30)
    stopper = threading.Thread(target=server.stop, args=(30,))
    stopper.start()
    assert not server.wait(0.2)
    assert not servicer.closed
    servicer.release.set()
    caller.join(30)
    stopper.join(30)
    assert results == [b"done"]
    assert server.wait(0)
    assert servicer.closed


def test_stop_refuses_new_calls(server: RunningServer, unary: Unary) -> None:
    server.stop(0)
    with pytest.raises(grpc.RpcError) as raised:
        unary("Echo")(b"", timeout=10)
    assert raised.value.code() == grpc.StatusCode.UNAVAILABLE


def test_port_in_use_is_a_config_error(
    occupied_port: int, definition: ServiceDefinition, servicer: ProbeServicer
) -> None:
    with pytest.raises(ConfigError) as raised:
        build_server(ServerConfig(port=occupied_port, metrics_port=0), [definition])
    assert raised.value.field == "port"
    assert str(raised.value) == f"port: port {occupied_port} is already in use"
    assert not servicer.closed  # the port is bound before any service is added


def test_metrics_port_in_use_is_a_config_error(
    occupied_port: int, definition: ServiceDefinition
) -> None:
    with pytest.raises(ConfigError) as raised:
        build_server(ServerConfig(port=0, metrics_port=occupied_port), [definition])
    assert raised.value.field == "metrics_port"


def test_server_without_services_serves_health() -> None:
    running = build_server(ServerConfig(port=0, metrics_port=0), [])
    try:
        with grpc.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            assert health_status(channel, "") == SERVING
    finally:
        running.stop(0)
    assert running.wait(0)


def self_signed_certificate(directory: Path) -> tuple[str, str]:
    """A certificate for 127.0.0.1 and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tidemark-test")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(cert_path), str(key_path)


def test_tls_server_talks_to_tls_client(tmp_path: Path) -> None:
    cert, key = self_signed_certificate(tmp_path)
    running = build_server(
        ServerConfig(port=0, metrics_port=0, tls_cert_path=cert, tls_key_path=key), []
    )
    address = f"127.0.0.1:{running.port}"
    try:
        with channel_for(address, config=ClientConfig(tls_ca_path=cert)) as channel:
            assert health_status(channel, "") == SERVING
        with grpc.insecure_channel(address) as plaintext, pytest.raises(grpc.RpcError):
            health_status(plaintext, "")
    finally:
        running.stop(0)
