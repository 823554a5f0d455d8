"""The services ``tidemark serve`` can run, by short name.

The services built into this release are the entry points of the group
``tidemark.services`` (pyproject.toml), each a ``ServiceDefinition``: this layer, below
the services, never names their modules, and a service's module is imported only when it
is served, so the CLI starts fast and its dependencies load only where it runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Protocol

import grpc
from prometheus_client import CollectorRegistry

from tidemark.config import ServerConfig
from tidemark.errors import ConfigError
from tidemark.rpc.limits import MethodPolicy

KNOWN_SERVICES: tuple[str, ...] = ("marker", "index", "planner")
ALL = "all"

ENTRY_POINT_GROUP = "tidemark.services"

ServiceLoader = Callable[[], object]
"""Imports a service's module and returns what should be its ``ServiceDefinition``."""


class Closeable(Protocol):
    def close(self) -> None: ...


ReadinessCheck = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class ServiceContext:
    """What a service gets when it is added to a server: its settings, the metrics
    registry, the address clients reach this replica at (the server is bound already),
    and where to register readiness checks."""

    config: ServerConfig
    metrics: CollectorRegistry
    advertise_address: str = ""
    readiness_checks: list[ReadinessCheck] = field(default_factory=list)

    def ready_when(self, check: ReadinessCheck) -> None:
        """Report NOT_SERVING until ``check`` returns (e.g. caches loaded; it runs on the
        server's event loop once the port answers); an exception stops the server."""
        self.readiness_checks.append(check)


@dataclass(frozen=True)
class ServiceDefinition:
    """``add_to_server`` registers an asyncio servicer (it runs on the server's event
    loop) and returns what to close after the server has stopped (flushing batches,
    releasing leases). ``replicable``: any process may answer any call (no state between
    calls but caches), so ``tidemark serve --workers N`` may run it in N processes.
    ``methods``: each method's role and request limit by its short name (a method not
    listed gets ``limits.DEFAULT_POLICY``)."""

    name: str
    full_name: str
    add_to_server: Callable[[grpc.aio.Server, ServiceContext], Closeable]
    replicable: bool = False
    methods: Mapping[str, MethodPolicy] = field(default_factory=dict)

    def policies(self) -> dict[str, MethodPolicy]:
        """``methods`` by full method path (``/package.Service/Method``)."""
        return {f"/{self.full_name}/{name}": policy for name, policy in self.methods.items()}


def available_services() -> dict[str, ServiceLoader]:
    """The services installed with this build, by short name, not yet imported."""
    return {point.name: point.load for point in entry_points(group=ENTRY_POINT_GROUP)}


def resolve_services(
    name: str, available: Mapping[str, ServiceLoader] | None = None
) -> list[ServiceDefinition]:
    """``name`` is a short service name or ``all`` (every available service)."""
    loaders = available_services() if available is None else available
    if name == ALL:
        return [load_definition(name, loaders[name]) for name in sorted(loaders)]
    if name not in KNOWN_SERVICES:
        raise ConfigError(
            f"unknown service {name!r} (choose from {', '.join((*KNOWN_SERVICES, ALL))})",
            field="service",
        )
    if name not in loaders:
        raise ConfigError(f"service {name} is not available in this build", field="service")
    return [load_definition(name, loaders[name])]


def load_definition(name: str, loader: ServiceLoader) -> ServiceDefinition:
    """Load service ``name`` and check it is a ``ServiceDefinition``."""
    definition = loader()
    if not isinstance(definition, ServiceDefinition):
        raise TypeError(f"service {name} is a {type(definition).__name__}, not a ServiceDefinition")
    return definition
