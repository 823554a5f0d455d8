"""A local S3-compatible server for tests and benchmarks, and a fault-injecting proxy.

``LocalS3Server`` runs moto's standalone server as a child process on a free loopback
port (``sys.executable -m tidemark.testing.moto_server``: moto's app as ``moto.server``
serves it, with conditional writes atomic as on S3; any virtualenv). ``FaultProxy``
is a small thread-per-connection HTTP reverse proxy placed in front of any S3 endpoint
to add latency and answer chosen requests with S3-style errors (503 SlowDown by
default), so retry behaviour is exercised against a real server, not a mock.
"""

from __future__ import annotations

import http.client
import random
import re
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit

import structlog

from tidemark.closing import Closing

log = structlog.get_logger(__name__)

STARTUP_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 5.0
UPSTREAM_TIMEOUT_S = 120.0
HOP_BY_HOP_HEADERS = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "expect"}
)


FIXED_PORTS_FROM = 10000
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def free_port() -> int:
    """A currently unused loopback TCP port below the kernel's ephemeral range: a port the
    kernel hands out for port 0 may go to any outgoing connection (a busy suite's gRPC
    channels, S3 and Spark clients) before the caller binds it, as one did in a run of the
    whole suite. Where the range is unknown, the kernel's choice."""
    try:
        ephemeral_from = int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_from = FIXED_PORTS_FROM
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            wanted = (
                random.randrange(FIXED_PORTS_FROM, ephemeral_from)
                if ephemeral_from > FIXED_PORTS_FROM
                else 0
            )
            try:
                probe.bind(("127.0.0.1", wanted))
            except OSError:
                continue
            return int(probe.getsockname()[1])


class LocalS3Server(Closing):
    """moto's S3 server in a child process; ``endpoint`` is its http://127.0.0.1:PORT URL."""

    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._log: IO[bytes] = tempfile.TemporaryFile(prefix="moto-server-")  # noqa: SIM115 (closed by close())
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tidemark.testing.moto_server", "--port", str(self.port)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        try:
            self._wait_until_ready()
        except BaseException:
            self.close()
            raise

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"moto server exited: {self._output()}")
            try:
                with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1):
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.1)
        raise RuntimeError(f"moto server not ready after {STARTUP_TIMEOUT_S}s: {self._output()}")

    def _output(self) -> str:
        self._log.seek(0)
        return self._log.read()[-2000:].decode(errors="replace")

    def close(self) -> None:
        """Terminate the server (kill it if it does not stop in time)."""
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._log.close()


@dataclass
class RequestPattern:
    """Requests matching ``method`` (None: any) and ``path_pattern`` (regex searched in the
    request target, e.g. '/bucket/key?query'; list prefixes in it are URL-encoded)."""

    method: str | None
    path_pattern: re.Pattern[str] | None

    def matches(self, method: str, target: str) -> bool:
        return (self.method is None or self.method == method) and (
            self.path_pattern is None or self.path_pattern.search(target) is not None
        )


@dataclass
class FaultRule(RequestPattern):
    """Matching requests get an S3 error, or with ``reset`` a reset connection and no
    answer at all; ``remaining`` None means until cleared. With ``forward`` the request
    still reaches the server first, as when a response is lost after the server acted."""

    remaining: int | None
    status: int
    code: str
    forward: bool
    reset: bool = False


@dataclass
class DelayRule(RequestPattern):
    """Matching requests are held ``delay_ms`` before they are forwarded (a slow upload)."""

    delay_ms: float


class FaultProxy(Closing):
    """Reverse proxy in front of ``upstream`` adding latency and injected S3 errors.

    ``latency_ms`` may be changed at any time. ``injected`` counts error responses sent.
    """

    def __init__(self, upstream: str, latency_ms: float = 0.0) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "http" or not parts.hostname or not parts.port:
            raise ValueError(f"upstream must be http://host:port, got {upstream!r}")
        self.upstream_host = parts.hostname
        self.upstream_port = parts.port
        self.latency_ms = latency_ms
        self.injected = 0
        self._rules: list[FaultRule] = []
        self._delays: list[DelayRule] = []
        self._lock = threading.Lock()
        self._server = _ProxyServer(("127.0.0.1", 0), _ProxyHandler, self)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fault-proxy",
            daemon=True,
        )
        self._thread.start()

    def fail_next(
        self,
        count: int,
        *,
        method: str | None = None,
        path_pattern: str | None = None,
        status: int = 503,
        code: str = "SlowDown",
        forward: bool = False,
        reset: bool = False,
    ) -> None:
        """Answer the next ``count`` matching requests with the error (or a reset)."""
        self._add(FaultRule(method, _compile(path_pattern), count, status, code, forward, reset))

    def fail_always(
        self,
        *,
        method: str | None = None,
        path_pattern: str | None = None,
        status: int = 503,
        code: str = "SlowDown",
        forward: bool = False,
        reset: bool = False,
    ) -> None:
        """Answer every matching request with the error (or a reset) until ``clear()``."""
        self._add(FaultRule(method, _compile(path_pattern), None, status, code, forward, reset))

    def delay(
        self, delay_ms: float, *, method: str | None = None, path_pattern: str | None = None
    ) -> None:
        """Hold every matching request ``delay_ms`` (besides ``latency_ms``) until ``clear()``."""
        with self._lock:
            self._delays.append(DelayRule(method, _compile(path_pattern), delay_ms))

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()
            self._delays.clear()

    def delay_for(self, method: str, target: str) -> float:
        """Seconds to hold this request: the longest matching delay rule."""
        with self._lock:
            delays = [rule.delay_ms for rule in self._delays if rule.matches(method, target)]
        return max(delays, default=0.0) / 1000

    def _add(self, rule: FaultRule) -> None:
        with self._lock:
            self._rules.append(rule)

    def take_fault(self, method: str, target: str) -> FaultRule | None:
        """The first rule matching this request, consuming one of its uses."""
        with self._lock:
            for rule in self._rules:
                if rule.matches(method, target):
                    if rule.remaining is not None:
                        rule.remaining -= 1
                        if rule.remaining == 0:
                            self._rules.remove(rule)
                    self.injected += 1
                    return rule
        return None

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def _compile(pattern: str | None) -> re.Pattern[str] | None:
    return re.compile(pattern) if pattern is not None else None


class _ProxyServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        proxy: FaultProxy,
    ) -> None:
        self.proxy = proxy
        super().__init__(address, handler)


class _ProxyHandler(BaseHTTPRequestHandler):
    """One client connection (keep-alive); one upstream connection reused alongside it."""

    protocol_version = "HTTP/1.1"
    server: _ProxyServer
    _upstream: http.client.HTTPConnection | None = None

    def log_message(self, format: str, *args: object) -> None:
        """Requests are not logged; the proxy is test and benchmark plumbing."""

    def handle_one_request(self) -> None:
        """Serve every method through one path: read, maybe delay or fail, forward."""
        self.raw_requestline = self.rfile.readline(65537)
        if not self.raw_requestline:
            self.close_connection = True
            return
        if not self.parse_request():
            return
        body = self._read_body()
        proxy = self.server.proxy
        delay_s = proxy.latency_ms / 1000 + proxy.delay_for(self.command, self.path)
        if delay_s > 0:
            time.sleep(delay_s)
        fault = proxy.take_fault(self.command, self.path)
        if fault is None:
            self._forward(body)
        else:
            if fault.forward:
                self._exchange(body)
            if fault.reset:
                self._reset()
                return
            self._send_error_xml(fault)
        self.wfile.flush()

    def _reset(self) -> None:
        """Close the client's connection with a TCP reset, answering nothing."""
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True

    def _read_body(self) -> bytes:
        """The request body exactly as framed on the wire (chunked framing kept)."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            framed = bytearray()
            while True:
                size_line = self.rfile.readline()
                framed += size_line
                size = int(size_line.split(b";")[0].strip(), 16)
                if size == 0:
                    while True:
                        trailer = self.rfile.readline()
                        framed += trailer
                        if trailer in (b"\r\n", b"\n", b""):
                            return bytes(framed)
                framed += self.rfile.read(size + 2)
        return self.rfile.read(int(self.headers.get("Content-Length", "0")))

    def _send_error_xml(self, fault: FaultRule) -> None:
        request_id = uuid.uuid4().hex
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{fault.code}</Code><Message>Injected by FaultProxy</Message>"
            f"<Resource>{self.path}</Resource><RequestId>{request_id}</RequestId></Error>"
        ).encode()
        self.send_response(fault.status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("x-amz-request-id", request_id)
        self.send_header("Content-Length", "0" if self.command == "HEAD" else str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _forward(self, body: bytes) -> None:
        response, payload = self._exchange(body)
        self.send_response_only(response.status, response.reason)
        for name, value in response.getheaders():
            if name.lower() not in HOP_BY_HOP_HEADERS and name.lower() != "content-length":
                self.send_header(name, value)
        if self.command == "HEAD":
            self.send_header("Content-Length", response.getheader("Content-Length", "0"))
        else:
            self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _exchange(self, body: bytes) -> tuple[http.client.HTTPResponse, bytes]:
        """Send the request upstream, reconnecting once if the kept-alive socket died."""
        try:
            return self._send_upstream(body)
        except (ConnectionError, http.client.HTTPException):
            self._close_upstream()
            return self._send_upstream(body)

    def _send_upstream(self, body: bytes) -> tuple[http.client.HTTPResponse, bytes]:
        if self._upstream is None:
            proxy = self.server.proxy
            self._upstream = http.client.HTTPConnection(
                proxy.upstream_host, proxy.upstream_port, timeout=UPSTREAM_TIMEOUT_S
            )
        upstream = self._upstream
        upstream.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
        for name, value in self.headers.items():
            if name.lower() not in ("connection", "keep-alive", "expect"):
                upstream.putheader(name, value)
        upstream.endheaders()
        upstream.send(body)
        response = upstream.getresponse()
        payload = response.read()
        if response.will_close:
            self._close_upstream()
        return response, payload

    def _close_upstream(self) -> None:
        if self._upstream is not None:
            self._upstream.close()
            self._upstream = None

    def finish(self) -> None:
        self._close_upstream()
        super().finish()
