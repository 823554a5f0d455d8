"""Service registry: short names, availability, lazy loading."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from tidemark.errors import ConfigError
from tidemark.rpc.registry import KNOWN_SERVICES, available_services, resolve_services

MODULE = """
from tidemark.rpc.registry import ServiceDefinition

SERVICE = ServiceDefinition(
    name="marker",
    full_name="tidemark.marker.v1.MarkerService",
    add_to_server=lambda server, context: None,
)
NOT_A_DEFINITION = 42
"""


@pytest.fixture
def plugin_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "registry_probe_service.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "registry_probe_service"


def test_unknown_service_names_the_choices() -> None:
    with pytest.raises(ConfigError) as raised:
        resolve_services("bogus")
    assert raised.value.field == "service"
    assert "bogus" in str(raised.value)
    assert all(name in str(raised.value) for name in KNOWN_SERVICES)


def test_known_but_unbuilt_service_is_not_available() -> None:
    """Every known service is built now; a build without the planner refuses it."""
    installed = available_services()
    assert set(installed) == set(KNOWN_SERVICES)
    built = {name: installed[name] for name in KNOWN_SERVICES if name != "planner"}
    with pytest.raises(ConfigError) as raised:
        resolve_services("planner", built)
    assert str(raised.value) == "service: service planner is not available in this build"


def test_all_resolves_every_available_service(plugin_module: str) -> None:
    available = {"marker": lambda: importlib.import_module(plugin_module).SERVICE}
    (definition,) = resolve_services("all", available)
    assert definition.full_name == "tidemark.marker.v1.MarkerService"
    assert resolve_services("marker", available) == [definition]
    with pytest.raises(ConfigError):
        resolve_services("index", available)


def test_spec_must_name_a_service_definition(plugin_module: str) -> None:
    with pytest.raises(TypeError):
        resolve_services(
            "marker", {"marker": lambda: importlib.import_module(plugin_module).NOT_A_DEFINITION}
        )
