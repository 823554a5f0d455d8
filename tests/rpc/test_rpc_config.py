"""Configuration precedence and validation."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from tidemark.config import ClientConfig, ServerConfig, env_default, load_config, parse_int
from tidemark.errors import ConfigError, PermissionDeniedError


def namespace(**values: object) -> argparse.Namespace:
    fields = {field.name: None for field in dataclasses.fields(ServerConfig)}
    return argparse.Namespace(**{**fields, "log_format": None, **values})


def test_defaults_without_flags_or_env() -> None:
    config = ServerConfig.from_args_and_env(namespace(), environ={})
    assert config == ServerConfig()
    assert config.max_message_bytes == 64 * 1024 * 1024


def test_env_overrides_default_and_flag_overrides_env() -> None:
    environ = {"TIDEMARK_PORT": "7000", "TIDEMARK_METRICS_PORT": "7001", "TIDEMARK_LOG_JSON": "no"}
    config = ServerConfig.from_args_and_env(namespace(port=8000), environ=environ)
    assert config.port == 8000
    assert config.metrics_port == 7001
    assert config.log_json is False


def test_log_format_flag_and_allowed_roots() -> None:
    environ = {"TIDEMARK_ALLOWED_ROOTS": "s3://a, /data", "TIDEMARK_LOG_JSON": "true"}
    from_env = ServerConfig.from_args_and_env(namespace(log_format="console"), environ=environ)
    assert from_env.allowed_roots == ("s3://a", "/data")
    assert from_env.log_json is False
    from_flags = ServerConfig.from_args_and_env(namespace(allowed_roots=["/x"]), environ=environ)
    assert from_flags.allowed_roots == ("/x",)


@pytest.mark.parametrize(
    ("variable", "value", "field"),
    [
        ("TIDEMARK_PORT", "abc", "port"),
        ("TIDEMARK_LOG_JSON", "maybe", "log_json"),
        ("TIDEMARK_GRACE_PERIOD_S", "soon", "grace_period_s"),
        ("TIDEMARK_PORT", "70000", "port"),
        ("TIDEMARK_MAX_MESSAGE_BYTES", "0", "max_message_bytes"),
        ("TIDEMARK_MAX_CONCURRENT_RPCS", "-1", "max_concurrent_rpcs"),
        ("TIDEMARK_GC_YOUNG_THRESHOLD", "0", "gc_young_threshold"),
        ("TIDEMARK_LOG_LEVEL", "loud", "log_level"),
    ],
)
def test_bad_env_values_name_the_field(variable: str, value: str, field: str) -> None:
    with pytest.raises(ConfigError) as raised:
        ServerConfig.from_args_and_env(namespace(), environ={variable: value})
    assert raised.value.field == field
    assert "\n" not in str(raised.value)


def test_unreadable_tls_path_is_rejected_at_load(tmp_path: Path) -> None:
    key = tmp_path / "key.pem"
    key.write_text("key")
    with pytest.raises(ConfigError) as raised:
        ServerConfig(tls_cert_path=str(tmp_path / "missing.pem"), tls_key_path=str(key))
    assert raised.value.field == "tls_cert_path"
    assert "missing.pem" in str(raised.value)


def test_tls_needs_cert_and_key(tmp_path: Path) -> None:
    cert = tmp_path / "cert.pem"
    cert.write_text("cert")
    with pytest.raises(ConfigError) as raised:
        ServerConfig(tls_cert_path=str(cert))
    assert raised.value.field == "tls_cert_path"


def test_allowed_roots_match_whole_path_segments() -> None:
    config = ServerConfig(allowed_roots=("s3://bucket/tables/",))
    config.check_table_path("s3://bucket/tables/orders")
    with pytest.raises(PermissionDeniedError) as raised:
        config.check_table_path("s3://bucket/tables-other/orders")
    assert raised.value.field == "table_path"
    ServerConfig().check_table_path("/anything")


@dataclasses.dataclass(frozen=True)
class SectionConfig:
    """A service-owned section, as the marker service declares its own."""

    batch_interval_ms: int = 50
    name: str = "x"


def test_services_load_their_own_section() -> None:
    environ = {"TIDEMARK_SECTION_BATCH_INTERVAL_MS": "20", "TIDEMARK_BATCH_INTERVAL_MS": "99"}
    assert load_config(SectionConfig, section="section", environ=environ) == SectionConfig(20)
    assert (
        load_config(SectionConfig, section="section", overrides={"name": "y"}, environ={}).name
        == "y"
    )


def test_env_default_parses_or_falls_back() -> None:
    assert env_default("port", 1, parse_int, environ={"TIDEMARK_PORT": " 5 "}) == 5
    assert env_default("port", 1, parse_int, environ={}) == 1


def test_client_config_from_env() -> None:
    config = ClientConfig.from_env({"TIDEMARK_CLIENT_TIMEOUT_S": "2.5"})
    assert config.timeout_s == 2.5
    with pytest.raises(ConfigError) as raised:
        ClientConfig.from_env({"TIDEMARK_CLIENT_MAX_ATTEMPTS": "0"})
    assert raised.value.field == "max_attempts"
