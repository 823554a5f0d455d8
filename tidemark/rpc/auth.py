"""Who may call, on which tables, and how much at once: bearer tokens scoped to table
roots and a role, and per-client concurrency.

Checked by the one server interceptor before a servicer runs, and before the request's
bytes are read (an unauthenticated flood costs no memory), as is the role a method needs.
Health, reflection and routes are exempt (Kubernetes' probes send no token), and read on
the small port only, whose receive limit bounds them. Tokens come from a file re-read when
its content changes (rotation without a restart) and compared in constant time. A line is
a token alone (today's format: every allowed root, every role) or a token followed by
``name=<name> role=<read|write|admin> roots=<root>[,<root>...]``; roles are ordered
(``write`` may read, ``admin`` may write). The file fails closed: a line that does not
parse grants nothing and its token is refused, a missing or unreadable file refuses
every token until it is back (both exported as metrics). A token is never logged:
lines name a client by its ``name``, else a short hash of it, and refused calls are
logged one line per peer and interval, with their count. A client (its token, else its client
certificate's subject) with too many calls in progress gets RESOURCE_EXHAUSTED with a
retry hint, so one job cannot starve the others. Anonymous callers (no token, no
certificate) are bounded by the server-wide limit only: one host may run a whole Spark
job, so a host is not a client.

Which table a call touches is known only once its request is parsed: the servicer's
table check (``tidemark.rpc.requests.table_uri``) asks ``authorize_table``, which reads
the call's grant from a context variable the interceptor set. A refusal is
PERMISSION_DENIED naming neither the token nor anything in the table.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import grpc
import structlog
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tidemark.clock import SYSTEM_CLOCK, Clock
from tidemark.config import ServerConfig, under_root
from tidemark.errors import ConfigError, PermissionDeniedError
from tidemark.rpc.status import RETRY_AFTER_KEY

log = structlog.get_logger(__name__)

Context = grpc.aio.ServicerContext[Any, Any]

EXEMPT_PREFIXES = (
    "/grpc.health.v1.Health/",
    "/grpc.reflection.",
    "/tidemark.common.v1.RoutesService/",
)
"""Methods anyone reaching the port may call: probes cannot send a token, and a client
asks where the methods are (``tidemark.rpc.routes``) before any other call."""
BEARER = "bearer "
TOKEN_RECHECK_S = 1.0
"""How often the token file is read again (not on every call of the hot path): a revoked
token is refused within this, whatever else the file holds."""
DENIED_LOG_INTERVAL_S = 10.0
"""``call denied`` lines: one per peer and interval, with the count of its refused calls."""
RETRY_AFTER_MS = 200
"""The wait suggested to a client over its concurrency limit."""


class Role(enum.IntEnum):
    """What a token may do; each role includes the ones below it."""

    READ = 1
    """Lookups, stats, listing markers and plans."""
    WRITE = 2
    """Markers, staging index changes, scheduling plans."""
    ADMIN = 3
    """Cancelling plans, compaction, deleting marker dirs without the table lock."""

    @property
    def label(self) -> str:
        return self.name.lower()


def is_exempt(method: str) -> bool:
    return method.startswith(EXEMPT_PREFIXES)


@dataclass(frozen=True)
class Grant:
    """What one token (or an unscoped caller) may do. ``roots`` None = every root the
    server allows."""

    name: str
    role: Role = Role.ADMIN
    roots: tuple[str, ...] | None = None

    def allows(self, table_uri: str, role: Role) -> bool:
        if role > self.role:
            return False
        return self.roots is None or any(under_root(table_uri, root) for root in self.roots)


def parse_token_line(line: str, number: int) -> tuple[bytes, Grant]:
    """One line of a token file: ``<token>`` or ``<token> name=.. role=.. roots=..``."""
    token, *fields = line.split()
    settings: dict[str, str] = {}
    for item in fields:
        key, separator, value = item.partition("=")
        if not separator or key not in ("name", "role", "roots") or not value:
            got = repr(key) if separator else "a field without '=' (never shown: a token?)"
            raise ConfigError(
                f"line {number}: expected name=, role= or roots=, got {got}",
                field="auth_token_file",
            )
        settings[key] = value
    role = Role.ADMIN
    if "role" in settings:
        try:
            role = Role[settings["role"].upper()]
        except KeyError:
            raise ConfigError(
                f"line {number}: role must be read, write or admin", field="auth_token_file"
            ) from None
    roots = tuple(settings["roots"].split(",")) if "roots" in settings else None
    name = settings.get("name") or "token:" + hashlib.sha256(token.encode()).hexdigest()[:12]
    return token.encode(), Grant(name=name, role=role, roots=roots)


def parse_token_file(text: str) -> tuple[tuple[tuple[bytes, Grant], ...], list[ConfigError]]:
    """The grants of the lines that parse, and the errors of those that do not. A token
    on a line that does not parse is refused even where another line grants it: a
    malformed revocation (a scope cut down, a role lowered) must not leave the token its
    old grant."""
    grants: list[tuple[bytes, Grant]] = []
    refused: set[bytes] = set()
    errors: list[ConfigError] = []
    for number, line in enumerate(text.split("\n"), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            grants.append(parse_token_line(line, number))
        except ConfigError as error:
            refused.add(line.split()[0].encode())
            errors.append(error)
    return tuple((token, grant) for token, grant in grants if token not in refused), errors


class TokenFile:
    """The accepted tokens and their grants, as the file holds them now: read again every
    ``TOKEN_RECHECK_S`` and reloaded when its content's hash changes (a rewrite keeping
    size and modification time counts). Fails closed: a line that does not parse grants
    nothing, a file that cannot be read grants nothing until it is back. At start a line
    that does not parse is refused (the operator sees the line at fault)."""

    def __init__(self, path: str, clock: Clock = SYSTEM_CLOCK) -> None:
        self._path = path
        self._clock = clock
        self._lock = threading.Lock()
        self._digest: bytes | None = None
        self._tokens: tuple[tuple[bytes, Grant], ...] = ()
        self.invalid_lines = 0
        """Lines of the loaded content that do not parse (their tokens refused)."""
        self.unreadable = False
        """The file could not be read at the last look (every token refused)."""
        self._checked = clock.monotonic()
        errors = self._refresh()
        if errors:
            raise errors[0]

    def grant_for(self, token: str | None) -> Grant | None:
        """The token's grant, None if unknown; constant-time comparison with every
        accepted token (no early exit)."""
        self.refresh_if_due()
        if not token:
            return None
        given = token.encode()
        found: Grant | None = None
        for accepted, grant in self._tokens:
            if hmac.compare_digest(given, accepted):
                found = grant
        return found

    def refresh_if_due(self) -> None:
        """Read the file again if ``TOKEN_RECHECK_S`` passed since the last look."""
        if self._clock.monotonic() - self._checked >= TOKEN_RECHECK_S:
            self._refresh()

    def _refresh(self) -> list[ConfigError]:
        """Read the file; the errors of its lines when its content changed."""
        with self._lock:
            self._checked = self._clock.monotonic()
            try:
                content = Path(self._path).read_bytes()
            except OSError as error:
                if not self.unreadable:
                    log.warning(
                        "token file unreadable: every token refused until it is back",
                        error=error.strerror,
                    )
                self._tokens, self._digest, self.unreadable = (), None, True
                return []
            self.unreadable = False
            digest = hashlib.sha256(content).digest()
            if digest == self._digest:
                return []
            tokens, errors = parse_token_file(content.decode(errors="replace"))
            self._tokens, self._digest, self.invalid_lines = tokens, digest, len(errors)
        if errors:
            log.warning(
                "token file invalid: the lines that do not parse grant nothing",
                errors=[error.message for error in errors],
            )
        log.info("token file loaded", tokens=len(tokens), invalid_lines=len(errors))
        return errors


class TokenFileMetrics(Collector):
    """Whether the token file is whole, read at each scrape (the file is read again
    first if it is due, so a file deleted while no call arrives shows too)."""

    def __init__(self, registry: CollectorRegistry, tokens: TokenFile) -> None:
        self._tokens = tokens
        registry.register(self)

    def collect(self) -> Iterator[Metric]:
        self._tokens.refresh_if_due()
        yield GaugeMetricFamily(
            "tidemark_auth_token_file_invalid_lines",
            "Lines of the token file that do not parse: they grant nothing, their tokens "
            "are refused.",
            value=self._tokens.invalid_lines,
        )
        yield GaugeMetricFamily(
            "tidemark_auth_token_file_unreadable",
            "1 while the token file is missing or unreadable: every token is refused.",
            value=int(self._tokens.unreadable),
        )


@dataclass
class _PeerDenials:
    reasons: Counter[str] = field(default_factory=Counter)
    clients: set[str] = field(default_factory=set)


class DeniedCalls:
    """``call denied`` lines, one per peer and interval with the count of its refused
    calls by reason, logged when the interval ends (a timer started by its first
    refusal): an unauthenticated flood logged a line per call, 9,658 lines from ~10 s of
    one. Thread-safe: the server's loop and its storage threads both refuse calls."""

    def __init__(self, interval_s: float = DENIED_LOG_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._peers: dict[str, _PeerDenials] = {}
        self._timer: threading.Timer | None = None

    def add(self, peer: str, reason: str, client: str | None = None) -> None:
        with self._lock:
            denials = self._peers.setdefault(peer, _PeerDenials())
            denials.reasons[reason] += 1
            if client:
                denials.clients.add(client)
            if self._timer is None:
                self._timer = threading.Timer(self.interval_s, self.flush)
                self._timer.daemon = True
                self._timer.start()

    def flush(self) -> None:
        """Log the interval's lines now (its end, or the server stopping)."""
        with self._lock:
            peers, self._peers = self._peers, {}
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        for peer, denials in peers.items():
            log.warning(
                "call denied",
                peer=peer,
                calls=denials.reasons.total(),
                reasons=dict(denials.reasons),
                clients=sorted(denials.clients),
                interval_s=self.interval_s,
            )


DENIED_CALLS = DeniedCalls()
"""The process's refused calls: logs are per process, and the interceptor reports the
refusals of methods the guard does not admit (a table outside the allowed roots)."""


@dataclass(frozen=True)
class CallGrant:
    """The grant of the call in progress and the role its method needs."""

    grant: Grant
    role: Role
    peer: str


_call_grant: ContextVar[CallGrant | None] = ContextVar("tidemark_call_grant", default=None)


def bind_call_grant(grant: CallGrant | None) -> None:
    """Set by the interceptor for each admitted call (None: nothing to check)."""
    _call_grant.set(grant)


def call_client_name() -> str | None:
    """The name of the token the call in progress was admitted with, for log lines."""
    call = _call_grant.get()
    return None if call is None else call.grant.name


def authorize_table(table_uri: str, *, field: str, role: Role | None = None) -> None:
    """Refuse a table the call's token does not cover, or a role it lacks (``role``
    raises the method's own, e.g. a delete without the table lock). The interceptor
    logs the refusal, once, with the peer and the token's name."""
    call = _call_grant.get()
    if call is None:
        return
    needed = max(call.role, role or call.role)
    if call.grant.allows(table_uri, needed):
        return
    raise PermissionDeniedError(
        f"the caller's credentials do not grant {needed.label} on this table", field=field
    )


def bearer_token(metadata: Iterable[tuple[str, str | bytes]] | None) -> str | None:
    """The token of an ``authorization: Bearer <token>`` header, if any."""
    for key, value in metadata or ():
        if key == "authorization" and isinstance(value, str) and value.lower().startswith(BEARER):
            return value[len(BEARER) :].strip()
    return None


def client_of(context: Context, token: str | None) -> str | None:
    """A stable name for the caller that reveals no secret; None = anonymous."""
    if token:
        return "token:" + hashlib.sha256(token.encode()).hexdigest()[:12]
    subject = certificate_subject(context)
    return None if subject is None else "cert:" + subject


def certificate_subject(context: Context) -> str | None:
    """The subject of the client's certificate (mutual TLS), if it sent one."""
    auth = context.auth_context()
    subject = list(auth.get("x509_subject") or auth.get("x509_common_name") or ())
    return subject[0].decode(errors="replace") if subject else None


class CallGuard:
    """Admits a call (token, per-client limit) and counts it until released. Runs on the
    server's event loop only, so the counters need no lock."""

    def __init__(self, config: ServerConfig, registry: CollectorRegistry) -> None:
        self._tokens = TokenFile(config.auth_token_file) if config.auth_token_file else None
        if self._tokens is not None:
            TokenFileMetrics(registry, self._tokens)
        self._limit = config.max_client_concurrent_rpcs
        self._in_flight: dict[str, int] = {}
        self.active = self._tokens is not None or config.tls_client_ca_path is not None
        """False when every caller is anonymous: nothing to check or count, so the
        interceptor skips admission (the marker create hot path pays nothing)."""

    async def admit(self, context: Context, role: Role) -> str | None:
        """The client's name, counted in (None: anonymous, not counted), with the call's
        grant bound for ``authorize_table``; aborts UNAUTHENTICATED or
        RESOURCE_EXHAUSTED, raises PermissionDeniedError for a token below ``role``."""
        token = bearer_token(cast(Iterable[tuple[str, str | bytes]], context.invocation_metadata()))
        grant = None
        if self._tokens is not None:
            grant = self._tokens.grant_for(token)
            if grant is None:
                DENIED_CALLS.add(
                    context.peer(),
                    "missing or unknown bearer token",
                    client_of(context, None),
                )
                await context.abort(
                    grpc.StatusCode.UNAUTHENTICATED,
                    "missing or unknown bearer token (send authorization: Bearer <token>)",
                )
            assert grant is not None
            bind_call_grant(CallGrant(grant, role, context.peer()))
            if grant.role < role:  # known before the request is read, so it is not read
                raise PermissionDeniedError(
                    f"the caller's credentials do not grant {role.label} on any table",
                    field="authorization",
                )
        client = client_of(context, token)
        if client is None:
            return None
        count = self._in_flight.get(client, 0)
        if count >= self._limit:
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"max_client_concurrent_rpcs: this client already has {count} calls in "
                f"progress; retry in {RETRY_AFTER_MS} ms",
                trailing_metadata=((RETRY_AFTER_KEY, str(RETRY_AFTER_MS)),),
            )
        self._in_flight[client] = count + 1
        return client

    def release(self, client: str) -> None:
        left = self._in_flight[client] - 1
        if left:
            self._in_flight[client] = left
        else:
            del self._in_flight[client]

    def close(self) -> None:
        """The server stopped: log the refusals of the interval in progress now."""
        DENIED_CALLS.flush()
