"""Channel options shared by server and client so their limits and keepalive agree.

A client that pings more often than the server permits
(``grpc.http2.min_ping_interval_without_data_ms``, 5 minutes by default) gets
GOAWAY(too_many_pings), and mismatched message limits fail only on large requests;
deriving both sides from the same three numbers avoids both.

Several replicas: a channel to a target naming its resolver (``dns:///name:port``, every
replica behind a headless Service; ``ipv4:a:p,b:p``) balances calls ``round_robin`` over
all the addresses it resolves to. gRPC resolves again only when a connection closes, so
servers close each connection after a jittered maximum age, which is how clients find
replicas started since. A plain ``host:port`` keeps gRPC's ``pick_first``: after its one
server restarts, pick_first reconnects on the next call, while round_robin fails calls
fast until its reconnect backoff ends (measured: 1.5 s of retries lost after a restart).

Each client channel keeps its own connections (``grpc.use_local_subchannel_pool``): in
gRPC's global pool a new channel to an address shares, with its reconnect backoff, the
connection of an older channel there, so a channel made for a server just started on a
port whose previous server died failed at once with the old "Connection refused". A
process caches one channel per address (tidemark/rpc/client.py), so nothing is shared
that way anyway.
"""

from __future__ import annotations

import json
import random

ROUND_ROBIN = json.dumps({"loadBalancingConfig": [{"round_robin": {}}]})
"""The service config of a channel to a target naming its resolver."""
BALANCED_SCHEMES = ("dns:", "ipv4:", "ipv6:")
MAX_RECONNECT_BACKOFF_MS = 5_000
"""A channel retries a lost connection at least this often (gRPC's default backoff grows
to 120 s), so a replica back from a restart gets its traffic back within seconds."""
AGE_JITTER = 0.1
"""Connection ages vary by this fraction either way, so the connections a client opened
at once to the replicas (and those of a job's many executors) do not all close together."""

Options = list[tuple[str, int | str]]
RECEIVE_LIMIT = "grpc.max_receive_message_length"


def client_options(
    *, target: str, max_message_bytes: int, keepalive_time_ms: int, keepalive_timeout_ms: int
) -> Options:
    """The shared limits and keepalive, and ``round_robin`` over the addresses of a
    target that names its resolver."""
    balancing: Options = [("grpc.service_config", ROUND_ROBIN)] if balanced(target) else []
    return [
        *_limits_and_keepalive(max_message_bytes, keepalive_time_ms, keepalive_timeout_ms),
        *balancing,
        ("grpc.max_reconnect_backoff_ms", MAX_RECONNECT_BACKOFF_MS),
        ("grpc.use_local_subchannel_pool", 1),
    ]


def balanced(target: str) -> bool:
    """Whether calls to ``target`` go round robin (it names a resolver: several replicas)."""
    return target.startswith(BALANCED_SCHEMES)


def _limits_and_keepalive(
    max_message_bytes: int, keepalive_time_ms: int, keepalive_timeout_ms: int
) -> Options:
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        (RECEIVE_LIMIT, max_message_bytes),
        ("grpc.keepalive_time_ms", keepalive_time_ms),
        ("grpc.keepalive_timeout_ms", keepalive_timeout_ms),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
    ]


def jittered_ms(seconds: float, rng: random.Random | None = None) -> int:
    """``seconds`` in milliseconds, moved at random by up to ``AGE_JITTER`` either way."""
    factor = (rng or random.Random()).uniform(1 - AGE_JITTER, 1 + AGE_JITTER)
    return max(1, round(seconds * 1000 * factor))


def server_options(
    *,
    max_message_bytes: int,
    max_receive_bytes: int | None = None,
    keepalive_time_ms: int,
    keepalive_timeout_ms: int,
    max_connection_age_ms: int,
    max_connection_age_grace_ms: int,
    reuse_port: bool = False,
) -> Options:
    """Same limits as the client, accept client pings twice as often as the client's
    keepalive sends them (a ping arriving a little early is a strike, three strikes
    close the connection with GOAWAY(too_many_pings)), and close connections at
    ``max_connection_age_ms`` (see ``jittered_ms``).

    ``so_reuseport`` is off so binding a port that another process holds fails loudly;
    only the worker processes of one ``tidemark serve --workers N`` share their port.
    ``max_receive_bytes`` (default ``max_message_bytes``): the largest request any method
    of this server takes (``tidemark.rpc.limits``); gRPC refuses longer ones unread.
    Without BDP probing a stream's window stays at 64 KiB until its handler asks for a
    message: a call waiting for admission cannot make gRPC buffer more (with it, 24
    unread 60 MB calls held 190 MiB; without, 2 MiB; a 60 MB read is as fast on loopback).
    """
    shared = _limits_and_keepalive(max_message_bytes, keepalive_time_ms, keepalive_timeout_ms)
    return [
        *(option for option in shared if option[0] != RECEIVE_LIMIT),
        (RECEIVE_LIMIT, max_receive_bytes or max_message_bytes),
        ("grpc.http2.min_ping_interval_without_data_ms", keepalive_time_ms // 2),
        ("grpc.max_connection_age_ms", max_connection_age_ms),
        ("grpc.max_connection_age_grace_ms", max_connection_age_grace_ms),
        ("grpc.so_reuseport", int(reuse_port)),
        ("grpc.http2.bdp_probe", 0),
    ]
