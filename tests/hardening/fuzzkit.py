"""The fuzzing harness: one ``tidemark serve`` process per service (a real process, so
its memory is its own), raw calls through a generic channel with identity serializers
(any bytes reach the server), and the checks every fuzzed call must pass.

A fuzzed call is ``Call(method, payload, metadata, timeout)``; its payload is bytes, or a
list of bytes for a client-streaming method. The server runs with a bearer token, so
metadata variants (the token, twice, a wrong one, garbage, none) reach admission.
"""

from __future__ import annotations

import random
import string
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from table.table_testkit import file_tree

from tidemark.config import ClientConfig
from tidemark.rpc.client import channel_for
from tidemark.rpc.process import ServeProcess

T = TypeVar("T")

TOKEN = "fuzz-token-0123456789"
AUTH = ("authorization", f"Bearer {TOKEN}")
MAX_MESSAGE_BYTES = 1 << 20
"""The fuzzed servers' message limit: a 'huge' request is just over it."""
RSS_GROWTH_BOUND_KIB = 300 << 10
"""How much a server's RSS may grow over one fuzz run (generous: allocator and caches
grow early and keep their pages); a leak per call over hundreds of calls of megabyte
payloads exceeds it."""
TIMEOUT_S = 30.0

Code = grpc.StatusCode
REFUSALS = frozenset(
    {
        Code.INVALID_ARGUMENT,
        Code.NOT_FOUND,
        Code.PERMISSION_DENIED,
        Code.UNAUTHENTICATED,
        Code.RESOURCE_EXHAUSTED,
    }
)
"""What any RPC may answer to a request it refuses; an RPC adds its own (e.g.
FAILED_PRECONDITION). Never INTERNAL, UNKNOWN, UNAVAILABLE or DATA_LOSS on a healthy
table: those would be bugs."""
PRECONDITION = frozenset({Code.FAILED_PRECONDITION})
"""For RPCs that depend on the table's state (a lock holder, a pending instant)."""
CLIENT_SIDE = frozenset({Code.DEADLINE_EXCEEDED, Code.CANCELLED})
"""What a call cut short by its caller (a zero deadline, a cancel) ends with."""


@dataclass(frozen=True)
class Rpc:
    """One method: its full name, whether requests or responses stream, and the codes
    it may answer besides OK and ``REFUSALS``."""

    method: str
    request_stream: bool = False
    response_stream: bool = False
    also: frozenset[Code] = frozenset()

    @property
    def allowed(self) -> frozenset[Code]:
        return REFUSALS | self.also | {Code.OK}


@dataclass(frozen=True)
class Call:
    rpc: Rpc
    payload: bytes | tuple[bytes, ...]
    metadata: tuple[tuple[str, str | bytes], ...]
    timeout: float = TIMEOUT_S


class FuzzedServer:
    """``tidemark serve SERVICE`` on loopback, with a token file, an allowed root and a
    small message limit; ``env`` adds settings (e.g. no background work)."""

    def __init__(self, service: str, root: Path, env: Mapping[str, str] | None = None) -> None:
        self.tokens = root / "tokens"
        self.tokens.write_text(f"{TOKEN}\n")
        self.root = root
        self.process = ServeProcess(
            service,
            env={"TIDEMARK_MAX_MESSAGE_BYTES": str(MAX_MESSAGE_BYTES), **(env or {})},
            args=[
                "--metrics-port",
                "0",
                "--allowed-root",
                str(root),
                "--auth-token-file",
                str(self.tokens),
            ],
        )
        self.codes: Counter[tuple[str, grpc.StatusCode]] = Counter()
        """(method, code) of every call sent, for the run's report."""
        self.channel = channel_for(
            self.process.address, config=ClientConfig(max_message_bytes=4 * MAX_MESSAGE_BYTES)
        )

    def close(self) -> None:
        self.channel.close()
        self.process.close()

    def rss_kib(self) -> int:
        """The server process's resident set (VmRSS of /proc/<pid>/status)."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def assert_serving(self, services: Sequence[str]) -> None:
        """The process is alive and its health says SERVING, overall and per service."""
        assert self.process.process.poll() is None, "the server process died"
        stub = health_pb2_grpc.HealthStub(self.channel)
        for name in ("", *services):
            answer = stub.Check(health_pb2.HealthCheckRequest(service=name), timeout=10)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING, name

    def code_of(self, call: Call) -> grpc.StatusCode:
        """Send ``call`` and return its status (reading a whole response stream)."""
        code = self._finish(call, self._start(call))
        self.codes[_name(call), code] += 1
        return code

    def _finish(self, call: Call, started: Any) -> grpc.StatusCode:
        """Wait for ``started`` (a future, or an iterator of responses) to end."""
        try:
            if call.rpc.response_stream:
                list(started)
            else:
                started.result()
        except grpc.RpcError as error:
            return error.code()
        except grpc.FutureCancelledError:
            return Code.CANCELLED
        return Code.OK

    def _start(self, call: Call) -> Any:
        """The call under way: a future (one response) or an iterator of responses;
        requests and responses are bytes (no serializers)."""
        rpc, channel, timeout, metadata = call.rpc, self.channel, call.timeout, call.metadata
        payload = call.payload
        if rpc.request_stream:
            requests = iter(payload if isinstance(payload, tuple) else (payload,))
            if rpc.response_stream:
                stream_stream = channel.stream_stream(rpc.method, None, None)
                return stream_stream(requests, timeout=timeout, metadata=metadata)
            stream_unary = channel.stream_unary(rpc.method, None, None)
            return stream_unary.future(requests, timeout=timeout, metadata=metadata)
        assert isinstance(payload, bytes)
        if rpc.response_stream:
            unary_stream = channel.unary_stream(rpc.method, None, None)
            return unary_stream(payload, timeout=timeout, metadata=metadata)
        unary_unary = channel.unary_unary(rpc.method, None, None)
        return unary_unary.future(payload, timeout=timeout, metadata=metadata)

    def check(self, call: Call) -> grpc.StatusCode:
        """Send ``call``: its code must be one ``call.rpc`` allows, and a refused call must
        leave every file under the root as it was."""
        before = file_tree(self.root)
        code = self.code_of(call)
        assert code in call.rpc.allowed, f"{call.rpc.method} answered {code}"
        if code != Code.OK:
            assert file_tree(self.root) == before, f"refused {call.rpc.method} changed files"
        return code

    def cancel_storm(self, calls: Sequence[Call], seed: int) -> list[grpc.StatusCode]:
        """Start every call at once and cancel about half of them after random short
        delays; the codes each call ended with."""
        rng = random.Random(seed)
        started = [self._start(call) for call in calls]
        cancellers = [
            threading.Timer(rng.uniform(0, 0.05), started_call.cancel)
            for started_call in started
            if rng.random() < 0.5
        ]
        for canceller in cancellers:
            canceller.start()
        codes = [self._finish(call, one) for call, one in zip(calls, started, strict=True)]
        self.codes.update((_name(call), code) for call, code in zip(calls, codes, strict=True))
        for canceller in cancellers:
            canceller.join()
        return codes


def _name(call: Call) -> str:
    return call.rpc.method.rsplit("/", 1)[1]


def mostly(good: st.SearchStrategy[T], bad: st.SearchStrategy[T]) -> st.SearchStrategy[T]:
    """``good`` three times in four, so most calls get past the first check."""
    return st.integers(0, 3).flatmap(lambda pick: good if pick else bad)


# Strategies shared by the three services

ODD_STRINGS = [
    "",
    " ",
    ".",
    "..",
    "/",
    "//",
    "../../etc/passwd",
    "a/../../b",
    "\x00",
    "/\x00",
    "/tmp/a\x00b",
    "a\nb",
    "\r\n",
    "\t",
    "%2F..%2F",
    "s3://",
    "s3:///x",
    "file:///",
    "hdfs://nn/x",
    "🔑",
    "ключ",
    "\u202e",
    "\ufeff",
    "MARKERS0",
    "*",
    "?",
    "$(id)",
    "a" * 5000,
]


def odd_text(max_size: int = 80) -> st.SearchStrategy[str]:
    """Strings with every odd character (control, separators, non-BMP, bidi) and the
    classic hostile spellings."""
    return st.one_of(
        st.sampled_from(ODD_STRINGS),
        st.text(st.characters(codec="utf-8"), max_size=max_size),
        st.text(st.sampled_from("/.\\:%\x00\n ?*#~"), max_size=12),
    )


def texts_or(*good: str) -> st.SearchStrategy[str]:
    """Mostly one of ``good`` (so calls reach deep validation), else odd text."""
    return mostly(st.sampled_from(good), odd_text())


SAFE_PRINTABLE = string.ascii_letters + string.digits + " -_.:/=+"


def metadata() -> st.SearchStrategy[tuple[tuple[str, str | bytes], ...]]:
    """The token alone (mostly), twice, after a wrong one, a wrong or garbage one, none;
    plus odd request ids and binary headers."""
    good = AUTH
    garbage = st.text(st.sampled_from(SAFE_PRINTABLE), max_size=60)
    auth = mostly(
        st.just((good,)),
        st.one_of(
            st.just((good, good)),
            st.just((("authorization", "Bearer wrong"), good)),
            st.just((good, ("authorization", "Bearer wrong"))),
            garbage.map(lambda value: (("authorization", value),)),
            st.just(()),
        ),
    )
    extra = st.lists(
        st.one_of(
            garbage.map(lambda value: ("x-request-id", value)),
            st.binary(max_size=40).map(lambda value: ("x-fuzz-bin", value)),
            garbage.map(lambda value: ("tidemark-error-class", value)),
        ),
        max_size=3,
    )
    return st.tuples(auth, extra).map(lambda pair: (*pair[0], *pair[1]))


def payloads(structured: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    """A request's bytes: mostly a structured message, else empty, random bytes (often
    undecodable) or a huge message over the server's limit."""
    return mostly(
        structured,
        st.one_of(
            st.just(b""),
            st.binary(max_size=200),
            st.just(b"\x0a" + b"\xff" * 9 + b"\x01"),  # a length past the end
            st.integers(MAX_MESSAGE_BYTES + 1, MAX_MESSAGE_BYTES + 4096).map(
                lambda size: b"\x0a" + _varint(size - 8) + b"x" * (size - 8)
            ),
        ),
    )


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def calls(rpcs: Mapping[Rpc, st.SearchStrategy[bytes]]) -> st.SearchStrategy[Call]:
    """A call of any of ``rpcs`` with its fuzzed payload and metadata (normal timeout)."""

    def one(rpc: Rpc) -> st.SearchStrategy[Call]:
        payload: st.SearchStrategy[bytes | tuple[bytes, ...]] = payloads(rpcs[rpc])
        if rpc.request_stream:
            payload = st.lists(payloads(rpcs[rpc]), min_size=0, max_size=4).map(tuple)
        return st.builds(Call, st.just(rpc), payload, metadata())

    return st.sampled_from(list(rpcs)).flatmap(one)


def short_deadline_calls(rpcs: Mapping[Rpc, st.SearchStrategy[bytes]]) -> st.SearchStrategy[Call]:
    """Calls with deadlines of zero or a few microseconds to milliseconds."""
    return st.builds(
        lambda call, timeout: Call(call.rpc, call.payload, call.metadata, timeout),
        calls(rpcs),
        st.sampled_from([0.0, 1e-6, 1e-4, 1e-3, 5e-3]),
    )


def fuzz_service(
    server: FuzzedServer,
    rpcs: Mapping[Rpc, st.SearchStrategy[bytes]],
    valid: Mapping[Rpc, bytes],
    services: Sequence[str],
    examples: int,
    probe: Rpc,
) -> None:
    """The whole run against one server, in this order so that no call cut short by its
    caller is still at work while refusals are checked for leaving files alone:

    1. fuzzed calls with a normal deadline, after one ``valid`` call per RPC: allowed
       codes only, a refusal changes no file, and the server is SERVING after each;
    2. the same with deadlines of zero to a few milliseconds;
    3. storms of concurrent calls, about half cancelled mid-flight;
    4. the server still SERVING and answering ``probe``'s valid call (a read) OK, its RSS
       grown by less than ``RSS_GROWTH_BOUND_KIB``;
       and every RPC was answered OK at least once and refused at least once (the
       strategies reach past validation), the codes seen are printed."""
    server.assert_serving(services)
    rss_before = server.rss_kib()

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))
    @given(call=calls(rpcs))
    def refused_calls_change_nothing(call: Call) -> None:
        server.check(call)
        server.assert_serving(services)

    @settings(max_examples=examples // 3, deadline=None, suppress_health_check=list(HealthCheck))
    @given(call=short_deadline_calls(rpcs))
    def short_deadlines(call: Call) -> None:
        code = server.code_of(call)
        assert code in call.rpc.allowed | CLIENT_SIDE, f"{call.rpc.method} answered {code}"
        server.assert_serving(services)

    @settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
    @given(storm=st.lists(calls(rpcs), min_size=20, max_size=40), seed=st.integers(0, 1 << 30))
    def cancel_storms(storm: list[Call], seed: int) -> None:
        for call, code in zip(storm, server.cancel_storm(storm, seed), strict=True):
            assert code in call.rpc.allowed | CLIENT_SIDE, f"{call.rpc.method} answered {code}"
        server.assert_serving(services)

    for rpc, payload in reversed(list(valid.items())):  # the last applied runs first
        refused_calls_change_nothing = example(call=Call(rpc, payload, (AUTH,)))(
            refused_calls_change_nothing
        )
    refused_calls_change_nothing()
    short_deadlines()
    cancel_storms()
    server.assert_serving(services)
    assert server.code_of(Call(probe, valid[probe], (AUTH,))) == Code.OK
    growth = server.rss_kib() - rss_before
    print(f"calls: {sum(server.codes.values())}, RSS growth: {growth} KiB")
    for (method, code), count in sorted(server.codes.items(), key=str):
        print(f"  {method} {code.name}: {count}")
    assert growth < RSS_GROWTH_BOUND_KIB, f"RSS grew {growth} KiB over the run"
    for rpc in rpcs:
        name = rpc.method.rsplit("/", 1)[1]
        assert server.codes[name, Code.OK], f"{name} never answered OK"
        assert server.codes[name, Code.INVALID_ARGUMENT], f"{name} never refused"
