"""One address per service: the bulk methods are served on a port of their own, which a
client finds through ``RoutesService`` on the address it was given; a server without
routes (an earlier release) is called on its one port."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest

from tidemark.config import ServerConfig
from tidemark.proto.common.v1 import routes_service_pb2 as routes_pb
from tidemark.proto.common.v1.routes_service_pb2_grpc import RoutesServiceStub
from tidemark.proto.index.v1 import index_service_pb2 as index_pb
from tidemark.rpc.client import channel_for
from tidemark.rpc.registry import resolve_services
from tidemark.rpc.routes import with_port
from tidemark.rpc.server import RunningServer, build_server

INDEX = "/tidemark.index.v1.IndexService"
BULK = {f"{INDEX}/Lookup", f"{INDEX}/StreamLookup", f"{INDEX}/StageChanges"}


@pytest.fixture
def index_server() -> Iterator[RunningServer]:
    running = build_server(ServerConfig(port=0, metrics_port=0), resolve_services("index"))
    yield running
    running.stop(0)


def lookup_code(channel: grpc.Channel) -> grpc.StatusCode:
    """The code of a Lookup of a table that does not exist."""
    request = index_pb.LookupRequest()
    request.table.base_path = "/nowhere/t"
    call = channel.unary_unary(f"{INDEX}/Lookup", index_pb.LookupRequest.SerializeToString, None)
    with pytest.raises(grpc.RpcError) as error:
        call(request, timeout=30)
    return error.value.code()


def test_bulk_methods_are_on_the_bulk_port_and_found_through_the_address(
    index_server: RunningServer,
) -> None:
    address = f"127.0.0.1:{index_server.port}"
    assert index_server.bulk_port not in (None, index_server.port)
    with grpc.insecure_channel(address) as plain:
        answer = RoutesServiceStub(plain).GetRoutes(routes_pb.GetRoutesRequest(), timeout=30)
        assert dict(answer.method_ports) == dict.fromkeys(BULK, index_server.bulk_port)
        assert lookup_code(plain) == grpc.StatusCode.UNIMPLEMENTED
    with channel_for(address) as routed:
        assert lookup_code(routed) == grpc.StatusCode.NOT_FOUND  # the service answered
        assert routed.target_of(f"{INDEX}/Lookup") == f"127.0.0.1:{index_server.bulk_port}"
        assert routed.target_of(f"{INDEX}/Stats") == address


def test_a_server_without_routes_is_called_on_its_one_port() -> None:
    echo = grpc.method_handlers_generic_handler(
        "old.v1.OldService", {"Echo": grpc.unary_unary_rpc_method_handler(lambda r, c: r)}
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[echo])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with channel_for(f"127.0.0.1:{port}") as routed:
            assert routed.unary_unary("/old.v1.OldService/Echo")(b"hi", timeout=30) == b"hi"
    finally:
        server.stop(0)


@pytest.mark.parametrize(
    ("target", "moved"),
    [
        ("host:50052", "host:50062"),
        ("[::1]:50052", "[::1]:50062"),
        (
            "dns:///tidemark-index.lake.svc.cluster.local:50052",
            "dns:///tidemark-index.lake.svc.cluster.local:50062",
        ),
        ("ipv4:127.0.0.1:50052,127.0.0.2:50052", "ipv4:127.0.0.1:50062,127.0.0.2:50062"),
    ],
)
def test_a_target_keeps_its_hosts_on_another_port(target: str, moved: str) -> None:
    assert with_port(target, 50062) == moved


def test_the_bulk_port_defaults_to_the_port_plus_ten() -> None:
    assert ServerConfig(port=50052).bulk_port_for(50052) == 50062
    assert ServerConfig(port=0).bulk_port_for(41234) == 0  # a free one beside a free one
    assert ServerConfig(port=50052, bulk_port=7000).bulk_port_for(50052) == 7000
