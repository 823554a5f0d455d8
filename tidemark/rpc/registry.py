"""The services ``tidemark serve`` can run, by short name.

``AVAILABLE_SERVICES`` is the explicit list of services built into this release, as
``"module:attribute"`` of a ``ServiceDefinition``; modules are imported only when
served, so the CLI starts fast and a service's dependencies load only where it runs.
A service lands by adding its line here.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import grpc
from prometheus_client import CollectorRegistry

from tidemark.config import ServerConfig
from tidemark.errors import ConfigError

KNOWN_SERVICES: tuple[str, ...] = ("marker", "index", "planner")
ALL = "all"

AVAILABLE_SERVICES: dict[str, str] = {
    "marker": "services.marker:SERVICE",
    "index": "services.index:SERVICE",
    "planner": "services.planner:SERVICE",
}


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
    calls but caches), so ``tidemark serve --workers N`` may run it in N processes."""

    name: str
    full_name: str
    add_to_server: Callable[[grpc.aio.Server, ServiceContext], Closeable]
    replicable: bool = False


def resolve_services(
    name: str, available: Mapping[str, str] = AVAILABLE_SERVICES
) -> list[ServiceDefinition]:
    """``name`` is a short service name or ``all`` (every available service)."""
    if name == ALL:
        return [load_definition(spec) for _, spec in sorted(available.items())]
    if name not in KNOWN_SERVICES:
        raise ConfigError(
            f"unknown service {name!r} (choose from {', '.join((*KNOWN_SERVICES, ALL))})",
            field="service",
        )
    if name not in available:
        raise ConfigError(f"service {name} is not available in this build", field="service")
    return [load_definition(available[name])]


def load_definition(spec: str) -> ServiceDefinition:
    """Import ``"module:attribute"`` and check it is a ``ServiceDefinition``."""
    module_name, _, attribute = spec.partition(":")
    definition = getattr(importlib.import_module(module_name), attribute)
    if not isinstance(definition, ServiceDefinition):
        raise TypeError(f"{spec} is a {type(definition).__name__}, not a ServiceDefinition")
    return definition
