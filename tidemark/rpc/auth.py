"""Who may call, and how much at once: bearer tokens and per-client concurrency.

Checked by the one server interceptor before a servicer runs. Health and reflection are
exempt (Kubernetes' probes send no token). Tokens come from a file of one token a line,
re-read when it changes (rotation without a restart) and compared in constant time; a
token is never logged, a client is named in limits by a short hash of it. A client (its
token, else its client certificate's subject) with too many calls in progress gets
RESOURCE_EXHAUSTED with a retry hint, so one job cannot starve the others. Anonymous
callers (no token, no certificate) are bounded by the server-wide limit only: one host
may run a whole Spark job, so a host is not a client.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast

import grpc
import structlog

from tidemark.config import ServerConfig
from tidemark.rpc.status import RETRY_AFTER_KEY

log = structlog.get_logger(__name__)

Context = grpc.aio.ServicerContext[Any, Any]

EXEMPT_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")
"""Methods anyone reaching the port may call: probes cannot send a token."""
BEARER = "bearer "
TOKEN_RECHECK_S = 1.0
"""How often the token file's mtime is looked at (not on every call of the hot path)."""
RETRY_AFTER_MS = 200
"""The wait suggested to a client over its concurrency limit."""


def is_exempt(method: str) -> bool:
    return method.startswith(EXEMPT_PREFIXES)


class TokenFile:
    """The accepted tokens, re-read when the file's mtime or size changes."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._version: tuple[int, int] | None = None
        self._tokens: tuple[bytes, ...] = ()
        self._checked = 0.0
        self._refresh()

    def accepts(self, token: str | None) -> bool:
        """Constant-time comparison with every accepted token (no early exit)."""
        now = time.monotonic()
        if now - self._checked >= TOKEN_RECHECK_S:
            self._refresh()
        if not token:
            return False
        given = token.encode()
        matched = False
        for accepted in self._tokens:
            matched |= hmac.compare_digest(given, accepted)
        return matched

    def _refresh(self) -> None:
        self._checked = time.monotonic()
        try:
            stat = Path(self._path).stat()
            version = (stat.st_mtime_ns, stat.st_size)
            if version == self._version:
                return
            lines = Path(self._path).read_text().split("\n")
        except OSError as error:
            log.warning("token file unreadable, keeping the previous tokens", error=error.strerror)
            return
        self._version = version
        self._tokens = tuple(line.strip().encode() for line in lines if line.strip())
        log.info("token file loaded", tokens=len(self._tokens))


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
    auth = context.auth_context()
    subject = list(auth.get("x509_subject") or auth.get("x509_common_name") or ())
    if subject:
        return "cert:" + subject[0].decode(errors="replace")
    return None


class CallGuard:
    """Admits a call (token, per-client limit) and counts it until released. Runs on the
    server's event loop only, so the counters need no lock."""

    def __init__(self, config: ServerConfig) -> None:
        self._tokens = TokenFile(config.auth_token_file) if config.auth_token_file else None
        self._limit = config.max_client_concurrent_rpcs
        self._in_flight: dict[str, int] = {}
        self.active = self._tokens is not None or config.tls_client_ca_path is not None
        """False when every caller is anonymous: nothing to check or count, so the
        interceptor skips admission (the marker create hot path pays nothing)."""

    async def admit(self, context: Context) -> str | None:
        """The client's name, counted in (None: anonymous, not counted); aborts
        UNAUTHENTICATED or RESOURCE_EXHAUSTED."""
        token = bearer_token(cast(Iterable[tuple[str, str | bytes]], context.invocation_metadata()))
        if self._tokens is not None and not self._tokens.accepts(token):
            await context.abort(
                grpc.StatusCode.UNAUTHENTICATED,
                "missing or unknown bearer token (send authorization: Bearer <token>)",
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
