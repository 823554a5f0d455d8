"""Index service replicas as real ``tidemark serve index`` processes on loopback, each on
a port of its own it keeps across a kill -9 and restart (as a StatefulSet's pod keeps
its name), and what each one served, from its /metrics."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import pyarrow as pa
from index.servicekit import scrape

from tidemark.clients.index_replicas import ranking
from tidemark.index.sharding import shard_of
from tidemark.rpc.process import ServeProcess
from tidemark.testing.s3local import free_port


def free_ports(count: int) -> list[int]:
    """``count`` distinct free ports below the kernel's ephemeral range (``free_port``: one
    the kernel hands out for port 0 may go to any outgoing connection of a busy suite before
    the replica binds it, and the replica then exits without a word)."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


class Replica:
    """One replica: started at once, ``kill()`` -9, ``start()`` again on the same ports."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self.port, self.metrics_port = free_ports(2)
        self.env = dict(env or {})
        self.address = f"127.0.0.1:{self.port}"
        self.process: ServeProcess | None = None
        self.start()

    def start(self) -> None:
        ports = ("--port", str(self.port), "--metrics-port", str(self.metrics_port))
        self.process = ServeProcess("index", env=self.env, args=(*ports, "--log-level", "error"))

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process = None

    def close(self) -> None:
        if self.process is not None:
            self.process.close()
            self.process = None

    def keys_served(self) -> float:
        """Keys this process has looked up since it started."""
        samples = scrape(self.metrics_port)
        return samples.get("tidemark_index_keys_total{found}", 0.0) + samples.get(
            "tidemark_index_keys_total{absent}", 0.0
        )


@contextmanager
def running(count: int, env: Mapping[str, str] | None = None) -> Iterator[list[Replica]]:
    """``count`` replicas, stopped (SIGTERM) on exit, whichever are still running."""
    started: list[Replica] = []
    try:
        for _ in range(count):
            started.append(Replica(env))
        yield started
    finally:
        for replica in started:
            replica.close()


def addresses(replicas: list[Replica]) -> str:
    return ",".join(replica.address for replica in replicas)


def owned_keys(table: str, keys: list[str], num_shards: int, replicas: list[Replica]) -> list[int]:
    """How many of ``keys`` each replica owns (their shard ranks it first)."""
    owners = [0] * len(replicas)
    named = [replica.address for replica in replicas]
    for shard in shard_of(pa.array(keys, pa.string()), num_shards).tolist():
        owners[ranking(table, shard, named)[0]] += 1
    return owners
