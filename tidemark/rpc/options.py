"""Channel options shared by server and client so their limits and keepalive agree.

A client that pings more often than the server permits gets GOAWAY(too_many_pings), and
mismatched message limits fail only on large requests; deriving both sides from the
same three numbers avoids both.
"""

from __future__ import annotations


def client_options(
    *, max_message_bytes: int, keepalive_time_ms: int, keepalive_timeout_ms: int
) -> list[tuple[str, int]]:
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.keepalive_time_ms", keepalive_time_ms),
        ("grpc.keepalive_timeout_ms", keepalive_timeout_ms),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
    ]


def server_options(
    *,
    max_message_bytes: int,
    keepalive_time_ms: int,
    keepalive_timeout_ms: int,
    reuse_port: bool = False,
) -> list[tuple[str, int]]:
    """Same limits as the client, and accept client pings at the client's keepalive rate.

    ``so_reuseport`` is off so binding a port that another process holds fails loudly;
    only the worker processes of one ``tidemark serve --workers N`` share their port.
    """
    return [
        *client_options(
            max_message_bytes=max_message_bytes,
            keepalive_time_ms=keepalive_time_ms,
            keepalive_timeout_ms=keepalive_timeout_ms,
        ),
        ("grpc.http2.min_recv_ping_interval_without_data_ms", keepalive_time_ms),
        ("grpc.so_reuseport", int(reuse_port)),
    ]
