"""Which port serves which method, on both sides.

A server serves its bulk methods on a port of their own (``tidemark.rpc.server``), so
that gRPC's per-server receive limit is each class's own. On the server side
``split_server`` hands what a service's ``add_to_server`` registers to the right server,
and ``add_routes`` answers ``RoutesService.GetRoutes`` with the bulk methods' port. On
the client side ``RoutedChannel`` is one address's channel: it asks that address once
for its routes and sends each method to its port on the same host, so clients, Spark
jobs and the chart's users configure one address per service. A server that does not
know ``RoutesService`` (older releases) serves everything on its one port.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import grpc

from tidemark.proto.common.v1 import routes_service_pb2 as pb
from tidemark.proto.common.v1 import routes_service_pb2_grpc as pb_grpc
from tidemark.rpc.auth import Role
from tidemark.rpc.limits import MethodPolicy

ROUTES_SERVICE = pb.DESCRIPTOR.services_by_name["RoutesService"].full_name
ROUTES_POLICIES = {f"/{ROUTES_SERVICE}/GetRoutes": MethodPolicy(Role.READ)}
"""Exempt from tokens as health is (``tidemark.rpc.auth``): ports and method names are
no secret, and a health check through a ``RoutedChannel`` asks first."""


class _Filtered(grpc.GenericRpcHandler):
    """``handler`` answering only for the methods ``serves`` accepts."""

    def __init__(self, handler: grpc.GenericRpcHandler, serves: Callable[[str], bool]) -> None:
        self._handler = handler
        self._serves = serves

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Any:
        method: str = handler_call_details.method
        return self._handler.service(handler_call_details) if self._serves(method) else None


class _SplitServer:
    """What a service's ``add_to_server`` registers, given to ``small`` or ``bulk`` by
    method (the generated ``add_*Servicer_to_server`` calls both methods below)."""

    def __init__(
        self, small: grpc.aio.Server, bulk: grpc.aio.Server | None, bulk_methods: frozenset[str]
    ) -> None:
        self._small = small
        self._bulk = bulk
        self._bulk_methods = bulk_methods

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        def small(method: str) -> bool:
            return method not in self._bulk_methods

        self._small.add_generic_rpc_handlers(tuple(_Filtered(h, small) for h in handlers))
        if self._bulk is not None:
            bulk = self._bulk_methods.__contains__
            self._bulk.add_generic_rpc_handlers(tuple(_Filtered(h, bulk) for h in handlers))

    def add_registered_method_handlers(
        self, service: str, handlers: Mapping[str, grpc.RpcMethodHandler]
    ) -> None:
        bulk = {name for name in handlers if f"/{service}/{name}" in self._bulk_methods}
        small = {name: handler for name, handler in handlers.items() if name not in bulk}
        self._small.add_registered_method_handlers(service, small)  # type: ignore[attr-defined]  # stubs predate it
        if self._bulk is not None:
            self._bulk.add_registered_method_handlers(  # type: ignore[attr-defined]
                service, {name: handlers[name] for name in bulk}
            )


def split_server(
    small: grpc.aio.Server, bulk: grpc.aio.Server | None, bulk_methods: frozenset[str]
) -> grpc.aio.Server:
    """A stand-in for the server a service adds itself to, registering ``bulk_methods``
    (full names) on ``bulk`` and the others on ``small``."""
    return cast(grpc.aio.Server, _SplitServer(small, bulk, bulk_methods))


class _RoutesServicer(pb_grpc.RoutesServiceServicer):
    def __init__(self, method_ports: Mapping[str, int]) -> None:
        self._response = pb.GetRoutesResponse(method_ports=method_ports)

    async def GetRoutes(  # noqa: N802 (gRPC method name)
        self, request: pb.GetRoutesRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.GetRoutesResponse:
        return self._response


def add_routes(server: grpc.aio.Server, method_ports: Mapping[str, int]) -> None:
    """Serve ``RoutesService`` on ``server``: ``method_ports`` by full method name."""
    pb_grpc.add_RoutesServiceServicer_to_server(_RoutesServicer(method_ports), server)


def with_port(target: str, port: int) -> str:
    """``target`` (``host:port``, ``dns:///name:port``, ``ipv4:a:p,b:p``) on ``port``."""
    return ",".join(f"{part.rpartition(':')[0]}:{port}" for part in target.split(","))


class RoutedChannel(grpc.Channel):
    """The channel to ``address`` whose calls go to the port serving their method there,
    asked of ``address`` at the first call (with that call's deadline and metadata: the
    token) and kept; ``open_channel`` makes the channel to one address."""

    def __init__(self, address: str, open_channel: Callable[[str], grpc.Channel]) -> None:
        self._address = address
        self._open = open_channel
        self._main = open_channel(address)
        self._routes: dict[str, grpc.Channel] | None = None
        self._others: list[grpc.Channel] = []
        self._lock = threading.Lock()

    def channel_of(self, method: str, timeout: float | None, metadata: Any) -> grpc.Channel:
        """The channel serving ``method``; the first call asks the routes (a failure to
        reach the service is that call's error, retried as it would be)."""
        routes = self._routes
        if routes is None:
            routes = self._discover(timeout, metadata)
        return routes.get(method, self._main)

    def target_of(self, method: str, timeout: float | None = None) -> str:
        """The address serving ``method``, for callers with channels of their own (the
        benchmarks' asyncio load)."""
        return self._target(method, self._ports(timeout, None))

    def _target(self, method: str, ports: Mapping[str, int]) -> str:
        return with_port(self._address, ports[method]) if method in ports else self._address

    def _ports(self, timeout: float | None, metadata: Any) -> dict[str, int]:
        """Method -> port, as the server answers; {} from a server without routes."""
        stub = pb_grpc.RoutesServiceStub(self._main)
        try:
            answer = stub.GetRoutes(pb.GetRoutesRequest(), timeout=timeout, metadata=metadata)
        except grpc.RpcError as error:
            if not isinstance(error, grpc.Call) or error.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise
            return {}
        return dict(answer.method_ports)

    def _discover(self, timeout: float | None, metadata: Any) -> dict[str, grpc.Channel]:
        ports = self._ports(timeout, metadata)
        with self._lock:
            if self._routes is None:
                channels = {
                    target: self._open(target) for target in {self._target(m, ports) for m in ports}
                }
                self._others = list(channels.values())
                self._routes = {method: channels[self._target(method, ports)] for method in ports}
            return self._routes

    def unary_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _RoutedCall(self, "unary_unary", method, args, kwargs)

    def unary_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _RoutedCall(self, "unary_stream", method, args, kwargs)

    def stream_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _RoutedCall(self, "stream_unary", method, args, kwargs)

    def stream_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _RoutedCall(self, "stream_stream", method, args, kwargs)

    def subscribe(self, callback: Any, try_to_connect: bool = False) -> None:
        self._main.subscribe(callback, try_to_connect)

    def unsubscribe(self, callback: Any) -> None:
        self._main.unsubscribe(callback)

    def close(self) -> None:
        self._main.close()
        for channel in self._others:
            channel.close()

    def __enter__(self) -> RoutedChannel:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class _RoutedCall:
    """A multi-callable whose channel is chosen at its first invocation."""

    def __init__(
        self,
        channel: RoutedChannel,
        kind: str,
        method: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> None:
        self._channel = channel
        self._kind = kind
        self._method = method
        self._args = args
        self._kwargs = kwargs
        self._target: Any = None

    def _resolve(self, call: Mapping[str, Any]) -> Any:
        if self._target is None:
            channel = self._channel.channel_of(
                self._method, call.get("timeout"), call.get("metadata")
            )
            make = getattr(channel, self._kind)
            self._target = make(self._method, *self._args, **self._kwargs)
        return self._target

    def __call__(self, request: Any, **call: Any) -> Any:
        return self._resolve(call)(request, **call)

    def with_call(self, request: Any, **call: Any) -> Any:
        return self._resolve(call).with_call(request, **call)

    def future(self, request: Any, **call: Any) -> Any:
        return self._resolve(call).future(request, **call)
