"""Every RPC of every service behind mutual TLS, bearer tokens and a table allowlist, on
real servers on loopback: the refusal codes, nothing created on disk, rotation of tokens
and certificates under a running client, the plaintext health port, per-client limits."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor, message_factory
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tidemark.cli import main
from tidemark.config import ClientConfig, ServerConfig
from tidemark.errors import ConfigError, ResourceExhaustedError, UnauthenticatedError
from tidemark.proto.index.v1 import index_service_pb2
from tidemark.proto.marker.v1 import marker_service_pb2, marker_service_pb2_grpc
from tidemark.proto.planner.v1 import planner_service_pb2
from tidemark.rpc.client import call, channel_for, shared_channel
from tidemark.rpc.registry import ALL, ServiceDefinition, resolve_services
from tidemark.rpc.server import RunningServer, build_server
from tidemark.rpc.status import RETRY_AFTER_KEY
from tidemark.table.properties.config import PROPERTIES_PATH

from .certs import Authority, Pair
from .probe import ProbeServicer

TOKEN = "s3cr3t-token-value-0001"
SERVICES = [
    module.DESCRIPTOR.services_by_name[name]
    for module, name in (
        (marker_service_pb2, "MarkerService"),
        (index_service_pb2, "IndexService"),
        (planner_service_pb2, "PlannerService"),
    )
]
METHODS = [method for service in SERVICES for method in service.methods]
INSTANT = "20260101000000000"


class Deployment:
    """The three services on one TLS port with a client CA, a token file and one allowed
    root; ``root`` holds ``table`` (a table) and ``plain`` (a folder that is not one)."""

    def __init__(self, directory: Path) -> None:
        self.authority = Authority(directory)
        self.server_pair = self.authority.issue("server", server=True)
        self.client_pair = self.authority.issue("client", server=False)
        self.tokens = directory / "tokens"
        self.tokens.write_text(f"{TOKEN}\n")
        self.root = directory / "allowed"
        self.outside = directory / "outside"
        for folder in (self.root / "table" / ".hoodie", self.root / "plain", self.outside):
            folder.mkdir(parents=True)
        (self.root / "table" / PROPERTIES_PATH).write_text("hoodie.table.name=t\n")
        (self.root / "link").symlink_to(self.outside)
        self.server = build_server(
            ServerConfig(
                port=0,
                metrics_port=0,
                health_port=0,
                tls_cert_path=self.server_pair.cert,
                tls_key_path=self.server_pair.key,
                tls_client_ca_path=self.authority.cert,
                auth_token_file=str(self.tokens),
                allowed_roots=(str(self.root),),
            ),
            resolve_services(ALL),
        )
        self.address = f"127.0.0.1:{self.server.port}"

    def client(self, *, certificate: bool = True, **settings: Any) -> ClientConfig:
        pair = self.client_pair if certificate else None
        return ClientConfig(
            tls_ca_path=self.authority.cert,
            tls_cert_path=pair.cert if pair else None,
            tls_key_path=pair.key if pair else None,
            max_attempts=1,
            **settings,
        )


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    running = Deployment(tmp_path_factory.mktemp("security"))
    yield running
    running.server.stop(0)


def tree(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*"))


def invoke(
    channel: grpc.Channel, method: descriptor.MethodDescriptor, base_path: str, token: str | None
) -> grpc.StatusCode:
    """Call ``method`` with a request naming ``base_path`` (an instant where one is
    needed); the status code it ends with."""
    request: Any = message_factory.GetMessageClass(method.input_type)()
    request.table.base_path = base_path
    for field in ("instant_time", "instant"):
        if (
            field in method.input_type.fields_by_name
            and not method.input_type.fields_by_name[field].message_type
        ):
            setattr(request, field, INSTANT)
    response = message_factory.GetMessageClass(method.output_type)
    path = f"/{method.containing_service.full_name}/{method.name}"
    kinds = {
        (False, False): channel.unary_unary,
        (False, True): channel.unary_stream,
        (True, False): channel.stream_unary,
        (True, True): channel.stream_stream,
    }
    stub: Any = kinds[(method.client_streaming, method.server_streaming)](
        path,
        request_serializer=lambda message: message.SerializeToString(),
        response_deserializer=response.FromString,
    )
    argument: Any = iter([request]) if method.client_streaming else request
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    try:
        result = stub(argument, timeout=30, metadata=metadata)
        if method.server_streaming:
            list(result)
    except grpc.RpcError as error:
        assert isinstance(error, grpc.Call)
        return error.code()
    return grpc.StatusCode.OK


@pytest.mark.parametrize("method", METHODS, ids=lambda method: method.full_name)
def test_every_rpc_refuses_what_it_must(
    deployment: Deployment, method: descriptor.MethodDescriptor
) -> None:
    before = tree(deployment.root.parent)
    table = str(deployment.root / "table")
    with channel_for(deployment.address, config=deployment.client()) as channel:
        assert invoke(channel, method, table, None) == grpc.StatusCode.UNAUTHENTICATED
        assert invoke(channel, method, table, "not-the-token") == grpc.StatusCode.UNAUTHENTICATED
        outside = str(deployment.outside)
        assert invoke(channel, method, outside, TOKEN) == grpc.StatusCode.PERMISSION_DENIED
        escaping = f"{deployment.root}/table/../../outside"
        assert invoke(channel, method, escaping, TOKEN) == grpc.StatusCode.INVALID_ARGUMENT
        linked = str(deployment.root / "link")
        assert invoke(channel, method, linked, TOKEN) == grpc.StatusCode.PERMISSION_DENIED
        for spelling in (f"file://{outside}", f"s3a://bucket{outside}"):
            assert invoke(channel, method, spelling, TOKEN) in (
                grpc.StatusCode.PERMISSION_DENIED,
                grpc.StatusCode.INVALID_ARGUMENT,
            )
        plain = str(deployment.root / "plain")
        assert invoke(channel, method, plain, TOKEN) == grpc.StatusCode.NOT_FOUND
    uncertified = deployment.client(certificate=False)
    with channel_for(deployment.address, config=uncertified) as channel:
        assert invoke(channel, method, table, TOKEN) == grpc.StatusCode.UNAVAILABLE
    assert tree(deployment.root.parent) == before


def health(channel: grpc.Channel) -> int:
    request = health_pb2.HealthCheckRequest(service="")
    return int(health_pb2_grpc.HealthStub(channel).Check(request, timeout=10).status)


def test_health_needs_no_token_and_answers_in_plaintext_on_its_port(
    deployment: Deployment,
) -> None:
    with channel_for(deployment.address, config=deployment.client()) as channel:
        assert health(channel) == health_pb2.HealthCheckResponse.SERVING
    with grpc.insecure_channel(f"127.0.0.1:{deployment.server.health_port}") as channel:
        assert health(channel) == health_pb2.HealthCheckResponse.SERVING
    with grpc.insecure_channel(deployment.address) as plaintext, pytest.raises(grpc.RpcError):
        health(plaintext)


def dir_exists(config: ClientConfig, deployment: Deployment) -> bool:
    """One authenticated call through the client runtime (``call``, shared channel)."""
    stub = marker_service_pb2_grpc.MarkerServiceStub(
        shared_channel(deployment.address, config=config)
    )
    request = marker_service_pb2.MarkerDirExistsRequest(instant_time=INSTANT)
    request.table.base_path = str(deployment.root / "table")
    return bool(call(stub.MarkerDirExists, request, idempotent=True, config=config).exists)


def answers(config: ClientConfig, deployment: Deployment) -> bool:
    """Whether a call with ``config``'s token is accepted (the server looks at its token
    file at most once a second, so rotation steps wait for this)."""
    try:
        dir_exists(config, deployment)
    except UnauthenticatedError:
        return False
    return True


def test_tokens_rotate_under_a_running_client(deployment: Deployment, tmp_path: Path) -> None:
    client_token = tmp_path / "client-token"
    client_token.write_text(TOKEN)
    running = deployment.client(token_file=str(client_token))
    assert dir_exists(running, deployment) is False
    rotated = "rotated-token-0002"
    deployment.tokens.write_text(f"{TOKEN}\n{rotated}\n")
    while not answers(deployment.client(token=rotated), deployment):
        pass
    client_token.write_text(f"{rotated}\n")
    assert dir_exists(running, deployment) is False
    deployment.tokens.write_text(f"{rotated}\n")
    while answers(deployment.client(token=TOKEN), deployment):
        pass
    assert dir_exists(running, deployment) is False
    deployment.tokens.write_text(f"{TOKEN}\n")
    while not answers(deployment.client(token=TOKEN), deployment):
        pass


def test_a_renewed_certificate_is_served_without_a_restart(
    deployment: Deployment, tmp_path: Path
) -> None:
    running = deployment.client(token=TOKEN)
    assert dir_exists(running, deployment) is False
    renewed_ca = Authority(tmp_path, "renewed ca")
    renewed = renewed_ca.issue("server-renewed", server=True)
    original = Pair(
        Path(deployment.server_pair.cert).read_text(), Path(deployment.server_pair.key).read_text()
    )
    Path(deployment.server_pair.key).write_text(Path(renewed.key).read_text())
    Path(deployment.server_pair.cert).write_text(Path(renewed.cert).read_text())
    try:
        assert dir_exists(running, deployment) is False  # its connection stays
        with grpc.secure_channel(
            deployment.address,
            grpc.ssl_channel_credentials(
                root_certificates=Path(renewed_ca.cert).read_bytes(),
                private_key=Path(deployment.client_pair.key).read_bytes(),
                certificate_chain=Path(deployment.client_pair.cert).read_bytes(),
            ),
        ) as fresh:
            assert health(fresh) == health_pb2.HealthCheckResponse.SERVING
        with (
            channel_for(deployment.address, config=deployment.client()) as old_trust,
            pytest.raises(grpc.RpcError),
        ):
            health(old_trust)
    finally:
        Path(deployment.server_pair.key).write_text(original.key)
        Path(deployment.server_pair.cert).write_text(original.cert)


@pytest.fixture
def limited(
    servicer: ProbeServicer, definition: ServiceDefinition, tmp_path: Path
) -> Iterator[RunningServer]:
    """The probe service allowing one call at a time per token (two accepted)."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN}\nother-job-token\n")
    config = ServerConfig(
        port=0, metrics_port=0, max_client_concurrent_rpcs=1, auth_token_file=str(tokens)
    )
    running = build_server(config, [definition])
    yield running
    servicer.release.set()
    running.stop(0)


def test_a_client_over_its_limit_is_told_to_retry_and_does(
    limited: RunningServer, servicer: ProbeServicer
) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{limited.port}") as channel:
        slow = channel.unary_unary("/tidemark.test.v1.TestService/Slow", None, None)
        echo = channel.unary_unary("/tidemark.test.v1.TestService/Echo", None, None)
        bearer = (("authorization", f"Bearer {TOKEN}"),)
        waiting = slow.future(b"", timeout=60, metadata=bearer)
        servicer.slow_started.wait(30)
        other = (("authorization", "Bearer other-job-token"),)
        assert echo(b"other", timeout=10, metadata=other) == b"other", "others are not starved"
        with pytest.raises(grpc.RpcError) as refused:
            echo(b"x", timeout=10, metadata=bearer)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "max_client_concurrent_rpcs" in (refused.value.details() or "")
        assert (RETRY_AFTER_KEY, "200") in (refused.value.trailing_metadata() or ())
        client = ClientConfig(max_attempts=2, token=TOKEN)
        with pytest.raises(ResourceExhaustedError):
            call(echo, b"x", idempotent=True, config=client)
        threading.Timer(0.5, servicer.release.set).start()
        patient = ClientConfig(max_attempts=20, token=TOKEN)
        assert call(echo, b"x", idempotent=True, config=patient) == b"x"
        assert waiting.result() == b"done"


def test_the_cli_dials_with_its_client_tls_flags(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--client-tls-*`` instead of the env vars; the token from the env. The table holds
    only its properties, so the answer that proves the call got through is the planner's
    own complaint about them. The flags go into the process's environment (where Spark
    executors read them), so the whole environment is restored after the test."""
    monkeypatch.setattr(os, "environ", os.environ.copy())
    for name in ("CA", "CERT", "KEY"):
        monkeypatch.delenv(f"TIDEMARK_CLIENT_TLS_{name}_PATH", raising=False)
    monkeypatch.setenv("TIDEMARK_CLIENT_TOKEN", TOKEN)
    pair = deployment.client_pair
    argv = ["cluster", "list", "--table", str(deployment.root / "table")]
    argv += ["--planner-service", deployment.address, "--json"]
    assert main(argv) == 2
    assert "unreachable" in capsys.readouterr().err
    tls = ["--client-tls-ca", deployment.authority.cert]
    tls += ["--client-tls-cert", pair.cert, "--client-tls-key", pair.key]
    assert main([*argv, *tls]) == 2
    assert "hoodie.properties is damaged" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"tls_client_ca_path": "CA"}, "tls_client_ca_path"),
        ({"health_port": 70000}, "health_port"),
        ({"auth_token_file": "/nonexistent/tokens"}, "auth_token_file"),
        ({"max_client_concurrent_rpcs": 0}, "max_client_concurrent_rpcs"),
    ],
)
def test_bad_server_security_settings_name_their_field(
    deployment: Deployment, settings: dict[str, Any], field: str
) -> None:
    values: dict[str, Any] = {
        key: deployment.authority.cert if value == "CA" else value
        for key, value in settings.items()
    }
    with pytest.raises(ConfigError) as raised:
        ServerConfig(**values)
    assert raised.value.field == field


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"tls_cert_path": "CERT"}, "tls_cert_path"),
        ({"tls_cert_path": "CERT", "tls_key_path": "KEY"}, "tls_ca_path"),
        ({"token_file": "/nonexistent/token"}, "token_file"),
    ],
)
def test_bad_client_security_settings_name_their_field(
    deployment: Deployment, settings: dict[str, Any], field: str
) -> None:
    paths = {"CERT": deployment.client_pair.cert, "KEY": deployment.client_pair.key}
    with pytest.raises(ConfigError) as raised:
        ClientConfig(**{key: paths.get(value, value) for key, value in settings.items()})
    assert raised.value.field == field
