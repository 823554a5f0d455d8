"""What two of the chart's alerts need to know of the pod, exported by the service itself:
the memory limit its container runs under (``tidemark_memory_limit_bytes``, beside
``process_resident_memory_bytes``) and when the certificate it serves expires
(``tidemark_tls_certificate_expiry_timestamp_seconds``). Both are read at scrape time, so
a renewed certificate (re-read by the server at the next handshake) shows at the next
scrape, and the alerts need neither kube-state-metrics nor cert-manager's metrics (a
certificate from any issuer counts).

No limit is ``+Inf`` (the memory alert's ratio is then 0); a server without TLS exports no
expiry, and an unreadable certificate file none until it reads again.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

from cryptography import x509
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

CGROUP_MEMORY_LIMITS = (
    Path("/sys/fs/cgroup/memory.max"),
    Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
)
"""cgroup v2's limit file, then v1's, as a container sees its own cgroup."""
UNLIMITED_BYTES = 1 << 60
"""cgroup v1 writes "no limit" as a number near 2**63 (page-rounded)."""


def memory_limit_bytes() -> float:
    """The container's memory limit in bytes; ``inf`` when it has none."""
    for path in CGROUP_MEMORY_LIMITS:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text == "max" or int(text) >= UNLIMITED_BYTES:
            return math.inf
        return float(text)
    return math.inf


def certificate_expiry(path: str) -> float | None:
    """When the first certificate of the PEM file at ``path`` expires (Unix seconds);
    None while it cannot be read or parsed (a renewal half written)."""
    try:
        certificate = x509.load_pem_x509_certificate(Path(path).read_bytes())
    except (OSError, ValueError):
        return None
    return certificate.not_valid_after_utc.timestamp()


class PodMetrics(Collector):
    """The memory limit, and the served certificate's expiry when ``certificate_path``."""

    def __init__(self, registry: CollectorRegistry, certificate_path: str | None) -> None:
        self.certificate_path = certificate_path
        registry.register(self)

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "tidemark_memory_limit_bytes",
            "Memory limit of this process's container (cgroup); +Inf when it has none.",
            value=memory_limit_bytes(),
        )
        expiry = certificate_expiry(self.certificate_path) if self.certificate_path else None
        if expiry is not None:
            yield GaugeMetricFamily(
                "tidemark_tls_certificate_expiry_timestamp_seconds",
                "When the TLS certificate this server serves expires (Unix seconds).",
                value=expiry,
            )
