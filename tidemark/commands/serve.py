"""``tidemark serve SERVICE``: run one service (or ``all``) until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import gc
import os
import signal
import threading
from collections.abc import Mapping
from types import FrameType
from typing import Any

import structlog

from tidemark.config import LOG_LEVELS, ServerConfig, env_var_name
from tidemark.logs import configure_logging
from tidemark.rpc.registry import ALL, KNOWN_SERVICES, resolve_services
from tidemark.rpc.server import build_server
from tidemark.rpc.workers import REUSE_PORT_FLAG, Workers, check_replicable

log = structlog.get_logger(__name__)

DEFAULT_PORTS: dict[str, tuple[int, int]] = {
    "marker": (50051, 9464),
    "index": (50052, 9465),
    "planner": (50053, 9466),
    ALL: (50051, 9464),
}
"""(gRPC port, metrics port) by service when neither flag nor env var sets them: each
service has its own, so the three run side by side on one host (``all`` is the three)."""
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
WORKER_POLL_S = 1.0
EXIT_WORKER_DIED = 1


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "serve",
        help="run a gRPC service",
        description="Run a Tidemark gRPC service. Unset flags fall back to TIDEMARK_* env vars.",
    )
    parser.add_argument("service", help=f"one of {', '.join((*KNOWN_SERVICES, ALL))}")
    parser.add_argument("--host", help="address to bind (TIDEMARK_HOST, default 127.0.0.1)")
    parser.add_argument(
        "--port",
        type=int,
        help="gRPC port, 0 = pick a free one (TIDEMARK_PORT; default marker 50051, "
        "index 50052, planner 50053)",
    )
    parser.add_argument(
        "--bulk-port",
        type=int,
        help="gRPC port of the methods taking large requests, which clients find through "
        "--port (TIDEMARK_BULK_PORT; default the gRPC port + 10, a free one with --port 0)",
    )
    parser.add_argument(
        "--advertise-address",
        metavar="HOST:PORT",
        help="address other clients dial to reach this replica (TIDEMARK_ADVERTISE_ADDRESS; "
        "default the bound host and port)",
    )
    parser.add_argument(
        "--max-connection-age-s",
        type=float,
        metavar="SECONDS",
        help="close connections after this long, jittered +-10%%, so clients find new "
        "replicas (TIDEMARK_MAX_CONNECTION_AGE_S, default 300)",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        help="Prometheus port, 0 = free (TIDEMARK_METRICS_PORT; default marker 9464, "
        "index 9465, planner 9466)",
    )
    parser.add_argument(
        "--grace-period",
        dest="grace_period_s",
        type=float,
        help="seconds for in-flight calls on shutdown",
    )
    parser.add_argument(
        "--max-concurrent-rpcs",
        type=int,
        help="calls in progress at once, beyond it RESOURCE_EXHAUSTED "
        "(TIDEMARK_MAX_CONCURRENT_RPCS, default 4096)",
    )
    parser.add_argument(
        "--gc-young-threshold",
        type=int,
        help="allocations between young-generation GC runs "
        "(TIDEMARK_GC_YOUNG_THRESHOLD, default 50000; Python's is 700)",
    )
    parser.add_argument("--tls-cert", dest="tls_cert_path", help="PEM certificate (with --tls-key)")
    parser.add_argument("--tls-key", dest="tls_key_path", help="PEM private key (with --tls-cert)")
    parser.add_argument(
        "--tls-client-ca",
        dest="tls_client_ca_path",
        metavar="PATH",
        help="mutual TLS: clients must present a certificate signed by this PEM CA "
        "(TIDEMARK_TLS_CLIENT_CA_PATH)",
    )
    parser.add_argument(
        "--health-port",
        type=int,
        help="also answer health checks in plaintext on this port, for probes that cannot "
        "speak TLS or send a token (TIDEMARK_HEALTH_PORT)",
    )
    parser.add_argument(
        "--auth-token-file",
        metavar="PATH",
        help="accepted bearer tokens, one a line, re-read when it changes "
        "(TIDEMARK_AUTH_TOKEN_FILE; default no token needed)",
    )
    parser.add_argument(
        "--max-client-concurrent-rpcs",
        type=int,
        help="calls in progress at once per client (token or certificate), beyond it "
        "RESOURCE_EXHAUSTED (TIDEMARK_MAX_CLIENT_CONCURRENT_RPCS, default 1024)",
    )
    parser.add_argument(
        "--log-format", choices=("json", "console"), help="default json (TIDEMARK_LOG_JSON)"
    )
    parser.add_argument("--log-level", choices=LOG_LEVELS, help="default info (TIDEMARK_LOG_LEVEL)")
    parser.add_argument(
        "--workers",
        type=int,
        help="processes serving the port, for services that allow it (index); one Python "
        "process uses one core (TIDEMARK_WORKERS, default 1)",
    )
    parser.add_argument(REUSE_PORT_FLAG, action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--allowed-root",
        dest="allowed_roots",
        action="append",
        metavar="PATH",
        help="table path prefix the service accepts; repeatable (default any)",
    )
    parser.set_defaults(handler=run)


def with_default_ports(args: argparse.Namespace, environ: Mapping[str, str]) -> argparse.Namespace:
    """``args`` with the service's own default ports where neither a flag nor an env var
    gives one."""
    port, metrics_port = DEFAULT_PORTS[args.service]
    chosen = dict(vars(args))
    for name, default in (("port", port), ("metrics_port", metrics_port)):
        if chosen.get(name) is None and env_var_name(name) not in environ:
            chosen[name] = default
    return argparse.Namespace(**chosen)


def tune_gc(young_threshold: int) -> None:
    """Collect the youngest generation less often. Only here: this process runs services
    and nothing else, while an embedded service shares its host's process and GC."""
    _, middle, old = gc.get_threshold()
    gc.set_threshold(young_threshold, middle, old)


def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM/SIGINT (exit 0), or until a worker process dies (exit 1, so
    the pod restarts whole)."""
    services = resolve_services(args.service)
    config = ServerConfig.from_args_and_env(with_default_ports(args, os.environ))
    check_replicable(config, services)
    configure_logging(json=config.log_json, level=config.log_level)
    tune_gc(config.gc_young_threshold)
    if not services:
        log.warning("no services available in this build; serving health and reflection only")
    stop_requested = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop_requested.set()

    previous = {signum: signal.signal(signum, request_stop) for signum in STOP_SIGNALS}
    try:
        reuse_port = config.workers > 1 or args.reuse_port
        running = build_server(config, services, reuse_port=reuse_port)
        try:
            workers = Workers(args.service, config, running.port, running.bulk_port)
        except BaseException:
            running.stop(0)
            raise
        print(f"listening on {config.host}:{running.port}", flush=True)
        while not stop_requested.wait(WORKER_POLL_S):
            code = workers.exited()
            if code is not None:
                log.error("a worker process stopped, stopping the others", exit_code=code)
                break
        workers.terminate()  # the workers drain while this process drains: one grace period
        running.stop(config.grace_period_s)
        workers.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 0 if stop_requested.is_set() else EXIT_WORKER_DIED
