"""The extra worker processes of ``tidemark serve SERVICE --workers N``.

One Python process computes on one core, so a CPU-bound service (the record index) scales
with processes: the first process binds the port (and the bulk port) with SO_REUSEPORT and
starts N-1 children that bind them too; the kernel spreads new connections over them (one
client channel is one connection, so it stays with one worker; many executors spread). Children
get the first process's resolved settings as ``TIDEMARK_*`` env vars, the same port, and
metrics port ``metrics_port + i`` (each process has its own /metrics; 0 = a free one).
Only services whose definition is ``replicable`` may run in several processes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import structlog

from tidemark.config import ServerConfig, env_var_name
from tidemark.errors import ConfigError
from tidemark.rpc.process import ServeProcess
from tidemark.rpc.registry import ServiceDefinition

log = structlog.get_logger(__name__)

REUSE_PORT_FLAG = "--reuse-port"
"""Hidden ``tidemark serve`` flag of a worker: bind a port its siblings hold."""


def check_replicable(config: ServerConfig, services: Sequence[ServiceDefinition]) -> None:
    """More than one worker only for services that allow it (the marker service keeps
    each marker dir in the memory of one process)."""
    single = [service.name for service in services if not service.replicable]
    if config.workers > 1 and single:
        raise ConfigError(
            f"{', '.join(single)} must run in one process per port (got {config.workers})",
            field="workers",
        )


def config_env(config: ServerConfig) -> dict[str, str]:
    """``config`` as the ``TIDEMARK_*`` env vars that load it again."""
    env: dict[str, str] = {}
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, tuple):
            text = ",".join(value)
        else:
            text = "" if value is None else str(value)
        env[env_var_name(field.name)] = text
    return env


class Workers:
    """The N-1 children of a ``--workers N`` server bound to ``port`` (and ``bulk_port``);
    started and listening when the constructor returns."""

    def __init__(
        self, service: str, config: ServerConfig, port: int, bulk_port: int | None
    ) -> None:
        self.processes: list[ServeProcess] = []
        env = config_env(config)
        try:
            for number in range(1, config.workers):
                metrics_port = config.metrics_port + number if config.metrics_port else 0
                args = ["--port", str(port), "--metrics-port", str(metrics_port)]
                if bulk_port is not None:
                    args += ["--bulk-port", str(bulk_port)]
                self.processes.append(
                    ServeProcess(
                        service,
                        env=env,
                        args=(*args, "--workers", "1", REUSE_PORT_FLAG),
                        show_logs=True,
                    )
                )
        except BaseException:
            self.stop()
            raise
        if self.processes:
            log.info("workers started", pids=[process.pid for process in self.processes])

    def exited(self) -> int | None:
        """The exit code of a worker that has stopped, if any has."""
        for process in self.processes:
            code = process.process.poll()
            if code is not None:
                return code
        return None

    def terminate(self) -> None:
        """SIGTERM every worker at once: they drain their calls side by side."""
        for process in self.processes:
            if process.process.poll() is None:
                process.process.terminate()

    def wait(self) -> None:
        """Wait for every worker to finish its shutdown."""
        for process in self.processes:
            process.close()

    def stop(self) -> None:
        """SIGTERM every worker, then wait for each."""
        self.terminate()
        self.wait()
