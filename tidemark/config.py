"""Configuration from CLI flags and ``TIDEMARK_*`` env vars, validated at load.

Precedence: a flag given on the command line beats the env var, which beats the
dataclass default. Each service declares its own frozen dataclass (e.g. the marker
service's ``MarkerConfig``) and loads it with ``load_config(MarkerConfig, section="marker")``,
which reads ``TIDEMARK_MARKER_<FIELD>``; nothing here needs to know about it.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from tidemark.checks import require_non_negative, require_positive
from tidemark.errors import ConfigError, PermissionDeniedError
from tidemark.retrying import RetryPolicy

T = TypeVar("T")

ENV_PREFIX = "TIDEMARK_"
MIB = 1024 * 1024
"""A mebibyte: the one unit of the byte sizes in options, flags and settings."""
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


def parse_bool(text: str) -> bool:
    """Accept the usual spellings of a boolean env var; anything else is an error."""
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError("not a boolean (use true/false, 1/0, yes/no, on/off)")


def parse_int(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError("not an integer") from None


def parse_float(text: str) -> float:
    try:
        return float(text.strip())
    except ValueError:
        raise ValueError("not a number") from None


def parse_optional_str(text: str) -> str | None:
    """An empty env var means "unset" for optional settings such as TLS paths."""
    return text or None


def parse_optional_int(text: str) -> int | None:
    """An empty env var means "unset" for optional numbers such as the health port."""
    return parse_int(text) if text.strip() else None


def parse_str_tuple(text: str) -> tuple[str, ...]:
    """Comma-separated list, blanks dropped."""
    return tuple(item.strip() for item in text.split(",") if item.strip())


PARSERS: dict[Any, Callable[[str], Any]] = {
    int: parse_int,
    float: parse_float,
    bool: parse_bool,
    str: str,
    str | None: parse_optional_str,
    int | None: parse_optional_int,
    tuple[str, ...]: parse_str_tuple,
}


def env_var_name(field: str, section: str = "") -> str:
    """``port`` -> ``TIDEMARK_PORT``; section ``marker`` -> ``TIDEMARK_MARKER_PORT``."""
    parts = [section, field] if section else [field]
    return ENV_PREFIX + "_".join(parts).upper()


def env_default(
    field: str,
    default: T,
    parse: Callable[[str], T],
    *,
    section: str = "",
    environ: Mapping[str, str] | None = None,
) -> T:
    """The parsed env var for ``field`` if set, else ``default``; bad values name the field."""
    env = os.environ if environ is None else environ
    name = env_var_name(field, section)
    raw = env.get(name)
    if raw is None:
        return default
    try:
        return parse(raw)
    except ValueError as error:
        raise ConfigError(f"{name}={raw!r} is {error}", field=field) from None


D = TypeVar("D")


def load_config(
    cls: type[D],
    *,
    section: str = "",
    overrides: Mapping[str, object] | None = None,
    environ: Mapping[str, str] | None = None,
) -> D:
    """Build the frozen dataclass ``cls``: overrides (non-None) > env vars > defaults.

    Field types must be one of ``PARSERS``' keys; the dataclass validates itself in
    ``__post_init__`` by raising ``ConfigError``.
    """
    given = overrides or {}
    hints = typing.get_type_hints(cls)
    values: dict[str, object] = {}
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        override = given.get(field.name)
        if override is not None:
            values[field.name] = override
            continue
        if field.default is dataclasses.MISSING:
            raise TypeError(f"config field {cls.__name__}.{field.name} needs a default")
        values[field.name] = env_default(
            field.name, field.default, PARSERS[hints[field.name]], section=section, environ=environ
        )
    return cls(**values)


def _canonical_root(root: str) -> str:
    """A local allowed root resolved (symlinks, ``..``); an S3 root as given."""
    return root if "://" in root else str(Path(root).resolve())


def _is_under(path: str, root: str) -> bool:
    prefix = root.rstrip("/")
    return path == prefix or path.startswith(prefix + "/")


def under_root(path: str, root: str) -> bool:
    """Whether the canonical ``path`` is ``root`` or inside it (a local root resolved)."""
    return _is_under(path, _canonical_root(root))


def require_port(field: str, value: int) -> None:
    if not 0 <= value <= 65535:
        raise ConfigError(f"port {value} is outside 0..65535", field=field)


def require_host_port(field: str, value: str) -> None:
    """``HOST:PORT`` with a host and a port in 1..65535 (an IPv6 host in brackets)."""
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise ConfigError(f"must be HOST:PORT, got {value!r}", field=field)


def require_readable(field: str, path: str) -> None:
    if not os.access(path, os.R_OK) or not Path(path).is_file():
        raise ConfigError(f"cannot read file {path}", field=field)


BULK_PORT_OFFSET = 10
"""The default bulk port is the gRPC port plus this (marker 50061, index 50062)."""


@dataclasses.dataclass(frozen=True)
class ServerConfig:
    """Settings shared by every gRPC service process (``tidemark serve``)."""

    host: str = "127.0.0.1"
    """Address to bind (``0.0.0.0`` in a pod)."""
    port: int = 50051
    """gRPC port; 0 picks a free one and logs it. ``tidemark serve`` defaults to a port per
    service (marker 50051, index 50052, planner 50053), so the three run side by side."""
    metrics_port: int = 9464
    """Prometheus ``/metrics`` port; 0 picks a free one. ``tidemark serve`` defaults to a
    port per service (marker 9464, index 9465, planner 9466); a port in use is named in the
    error."""
    max_message_bytes: int = 64 * MIB
    """Largest gRPC message either way (clients use the same)."""
    keepalive_time_ms: int = 30_000
    """HTTP/2 keepalive ping interval, matched with the clients'."""
    keepalive_timeout_ms: int = 10_000
    """How long a keepalive ping may go unanswered before the connection is closed."""
    grace_period_s: float = 10.0
    """Seconds in-flight calls get after SIGTERM."""
    max_concurrent_rpcs: int = 4096
    """Calls in progress at once (waiting marker creates included); beyond it new calls
    get RESOURCE_EXHAUSTED and clients back off. A waiting call costs a coroutine."""
    bulk_port: int | None = None
    """gRPC port of the methods whose requests may exceed 256 KiB (index lookup and stage
    batches, marker batches), served apart so that every other method's small limit holds
    before a request is read (docs/security.md). Clients dial ``port`` only and ask it
    for this one. Unset = ``port`` + 10 (a free one when ``port`` is 0)."""
    max_request_memory_bytes: int = 256 * MIB
    """Bytes of large requests (index batches, marker batches) a server holds at once:
    a bulk call reserves the bulk port's limit before each message it reads, keeps three
    times the message's size while it is handled, and waits while this budget, or its
    caller's share of it, is spent. Small requests are bounded by
    ``max_concurrent_rpcs`` and the small port's limit (64 KiB at most)."""
    max_caller_request_memory_bytes: int = 128 * MIB
    """Of ``max_request_memory_bytes``, what one caller (its bearer token, else its client
    certificate, else its host) holds at once; beyond it that caller's calls wait, and
    the others' do not. At least one bulk message is always allowed."""
    request_idle_s: float = 20.0
    """A bulk call that sends no whole message within this long while it holds request
    memory (a request sent in part, a stream that stopped sending) is ended
    RESOURCE_EXHAUSTED and its memory released."""
    gc_young_threshold: int = 50_000
    """Allocations between collections of Python's youngest GC generation in a service
    process (Python's default: 700). A marker create allocates dozens of tracked objects
    while hundreds of calls wait at once, so the default collects every few dozen calls
    and rescans the waiting ones each time: a fifth of a create's CPU and most of its p99
    on the marker benchmark. Older generations keep Python's defaults."""
    tls_cert_path: str | None = None
    """PEM certificate: serve TLS (with ``tls_key_path``; both must be readable)."""
    tls_key_path: str | None = None
    """PEM private key of ``tls_cert_path``. Certificate and key are re-read when either
    file changes, so a renewed certificate is served without a restart."""
    tls_client_ca_path: str | None = None
    """PEM CA bundle for mutual TLS: every client must present a certificate it signed
    (needs ``tls_cert_path``)."""
    health_port: int | None = None
    """Also serve the health service alone on this plaintext port (no TLS, no token), for
    Kubernetes' native gRPC probes; unset = health only on the main port."""
    auth_token_file: str | None = None
    """File of accepted bearer tokens, one a line, each optionally scoped
    (``<token> name=.. role=read|write|admin roots=..``, docs/security.md); read again
    every second and reloaded when its content changes, so tokens rotate without a
    restart. Fails closed: a line that does not parse grants nothing (its token refused),
    a missing file refuses every token. Set = every call but health and reflection needs
    ``authorization: Bearer <token>``, else UNAUTHENTICATED."""
    max_client_concurrent_rpcs: int = 1024
    """Calls in progress at once per client (its bearer token, else its client certificate's
    subject; anonymous callers only count towards ``max_concurrent_rpcs``); beyond it
    RESOURCE_EXHAUSTED with a retry hint the clients wait out, so one job cannot starve the
    others. A waiting marker create is a call: size it for a job's concurrent tasks."""
    log_json: bool = True
    """structlog's JSON renderer (``--log-format json``), else the console one."""
    log_level: str = "info"
    """Lowest level logged: debug, info, warning, error."""
    allowed_roots: tuple[str, ...] = ()
    """Table path prefixes (local or ``s3://bucket/prefix``) the services accept; empty =
    any. Env var: comma-separated."""
    workers: int = 1
    """Processes serving on the one port (SO_REUSEPORT; the kernel spreads connections
    over them), for services that allow it. One Python process uses one core."""
    advertise_address: str | None = None
    """``HOST:PORT`` other clients dial to reach this replica (in Kubernetes the pod's name
    under a headless Service); the marker service names it to clients that asked another
    replica for a marker dir this one owns. Unset = the bound host and port (this host's
    name when bound to every interface)."""
    max_connection_age_s: float = 300.0
    """Connections older than this (jittered +-10%) are closed gracefully, so clients of a
    ``dns:///`` target resolve again and find replicas started since."""
    max_connection_age_grace_s: float = 60.0
    """Calls in progress on a connection closed for its age get this long to finish:
    longer than any call (clients give each attempt 30 s by default)."""

    def __post_init__(self) -> None:
        require_port("port", self.port)
        require_port("metrics_port", self.metrics_port)
        if self.bulk_port is not None:
            require_port("bulk_port", self.bulk_port)
        for field in (
            "max_message_bytes",
            "keepalive_time_ms",
            "keepalive_timeout_ms",
            "max_concurrent_rpcs",
            "max_request_memory_bytes",
            "max_caller_request_memory_bytes",
            "request_idle_s",
            "max_client_concurrent_rpcs",
            "gc_young_threshold",
            "workers",
            "max_connection_age_s",
            "max_connection_age_grace_s",
        ):
            require_positive(field, getattr(self, field), error=ConfigError)
        require_non_negative("grace_period_s", self.grace_period_s, error=ConfigError)
        if (self.tls_cert_path is None) != (self.tls_key_path is None):
            raise ConfigError("TLS needs both a certificate and a key", field="tls_cert_path")
        if self.tls_cert_path is not None and self.tls_key_path is not None:
            require_readable("tls_cert_path", self.tls_cert_path)
            require_readable("tls_key_path", self.tls_key_path)
        if self.health_port is not None:
            require_port("health_port", self.health_port)
        if self.tls_client_ca_path is not None:
            if self.tls_cert_path is None:
                raise ConfigError(
                    "mutual TLS needs --tls-cert and --tls-key", field="tls_client_ca_path"
                )
            require_readable("tls_client_ca_path", self.tls_client_ca_path)
        if self.auth_token_file is not None:
            require_readable("auth_token_file", self.auth_token_file)
        if self.advertise_address is not None:
            require_host_port("advertise_address", self.advertise_address)
        log_level_number(self.log_level)

    @property
    def tls(self) -> bool:
        return self.tls_cert_path is not None

    def bulk_port_for(self, port: int) -> int:
        """The bulk port to bind beside ``port`` (the bound one: 0 stays a free one)."""
        if self.bulk_port is not None:
            return self.bulk_port
        return port + BULK_PORT_OFFSET if self.port else 0

    def check_table_path(
        self, table_path: str, *, field: str = "table_path", given: str | None = None
    ) -> None:
        """Refuse a canonical table path outside ``allowed_roots`` (empty = any) so a
        service cannot be pointed at arbitrary storage. Local roots are resolved like the
        table path (symlinks followed), so neither side can alias the other. The refusal
        names the path as the caller ``given`` it: where its links lead is none of its
        business."""
        if not self.allowed_roots or any(
            under_root(table_path, root) for root in self.allowed_roots
        ):
            return
        raise PermissionDeniedError(
            f"{given or table_path} is not under an allowed root", field=field
        )

    @classmethod
    def from_args_and_env(
        cls, args: argparse.Namespace, environ: Mapping[str, str] | None = None
    ) -> ServerConfig:
        """Flags use the field names as argparse ``dest``; ``log_format`` maps to ``log_json``."""
        overrides = dict(vars(args))
        log_format = overrides.pop("log_format", None)
        if log_format is not None:
            overrides["log_json"] = log_format == "json"
        if overrides.get("allowed_roots") is not None:
            overrides["allowed_roots"] = tuple(overrides["allowed_roots"])
        return load_config(cls, overrides=overrides, environ=environ)


@dataclasses.dataclass(frozen=True)
class ClientConfig:
    """Client-side RPC settings; plain values so Spark can ship them to executors."""

    timeout_s: float = 30.0
    """Deadline of every call attempt."""
    max_attempts: int = 5
    """Attempts for retryable codes (UNAVAILABLE, RESOURCE_EXHAUSTED; DEADLINE_EXCEEDED and
    CANCELLED, which a replica shutting down answers, for calls safe to repeat)."""
    max_total_s: float = 120.0
    """Total retry budget of one call."""
    initial_backoff_s: float = 0.1
    """First backoff between attempts (exponential, with jitter)."""
    max_backoff_s: float = 5.0
    """Longest backoff between attempts."""
    max_message_bytes: int = 64 * MIB
    """Largest gRPC message either way (the servers use the same)."""
    keepalive_time_ms: int = 30_000
    """HTTP/2 keepalive ping interval, matched with the servers'."""
    keepalive_timeout_ms: int = 10_000
    """How long a keepalive ping may go unanswered before the channel reconnects."""
    tls_ca_path: str | None = None
    """PEM roots to trust: set = every channel is TLS (``--client-tls-ca``)."""
    tls_cert_path: str | None = None
    """PEM client certificate presented for mutual TLS (with ``tls_key_path``)."""
    tls_key_path: str | None = None
    """PEM private key of ``tls_cert_path``."""
    token_file: str | None = None
    """File holding the bearer token sent as ``authorization: Bearer``; re-read when it
    changes. Spark executors read the same path, so the token never enters Spark's
    configuration."""
    token: str | None = dataclasses.field(default=None, repr=False)
    """The bearer token itself when no ``token_file`` is set (never forwarded to Spark
    executors nor logged: prefer ``token_file`` for Spark jobs)."""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, int | float):
                require_positive(field.name, value, error=ConfigError)
        if (self.tls_cert_path is None) != (self.tls_key_path is None):
            raise ConfigError(
                "a client certificate needs its key and the key its certificate",
                field="tls_cert_path",
            )
        if self.tls_cert_path is not None and self.tls_ca_path is None:
            raise ConfigError("a client certificate needs tls_ca_path", field="tls_ca_path")
        for field_name in ("tls_ca_path", "tls_cert_path", "tls_key_path", "token_file"):
            path = getattr(self, field_name)
            if path is not None:
                require_readable(field_name, path)

    @property
    def tls(self) -> bool:
        return self.tls_ca_path is not None

    @property
    def retry_policy(self) -> RetryPolicy:
        """The retries of one call (``max_attempts``, the backoffs and ``max_total_s``)."""
        return RetryPolicy(
            self.max_attempts, self.initial_backoff_s, self.max_backoff_s, self.max_total_s
        )

    def without_credentials(self) -> ClientConfig:
        """These settings without TLS or token: for a service embedded in this process,
        which listens in plaintext on loopback and checks no token."""
        return dataclasses.replace(
            self,
            tls_ca_path=None,
            tls_cert_path=None,
            tls_key_path=None,
            token_file=None,
            token=None,
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ClientConfig:
        """Reads ``TIDEMARK_CLIENT_<FIELD>``."""
        return load_config(cls, section="client", environ=environ)


CLIENT_FLAGS = {
    "--client-tls-ca": "tls_ca_path",
    "--client-tls-cert": "tls_cert_path",
    "--client-tls-key": "tls_key_path",
}
"""Flags of the commands that dial a service, by the ``ClientConfig`` field they set."""


def add_client_arguments(parser: argparse.ArgumentParser) -> None:
    """``--client-tls-ca/-cert/-key`` (same as ``TIDEMARK_CLIENT_TLS_*_PATH``)."""
    for flag, field in CLIENT_FLAGS.items():
        parser.add_argument(
            flag,
            dest=f"client_{field}",
            metavar="PATH",
            help=f"PEM file for TLS to the services ({env_var_name(field, 'client')})",
        )


def export_client_arguments(args: argparse.Namespace) -> None:
    """Put the client flags given into this process's environment, where every client
    (``ClientConfig.from_env``: the driver's, and Spark executors', which get the
    driver's ``TIDEMARK_*`` variables) reads them."""
    for field in CLIENT_FLAGS.values():
        value = getattr(args, f"client_{field}", None)
        if value is not None:
            os.environ[env_var_name(field, "client")] = value


def log_level_number(level: str) -> int:
    """``"info"`` -> ``logging.INFO``; unknown names are a ``ConfigError``."""
    if level.lower() not in LOG_LEVELS:
        raise ConfigError(
            f"unknown level {level!r} (use {', '.join(LOG_LEVELS)})", field="log_level"
        )
    return int(logging.getLevelName(level.upper()))
