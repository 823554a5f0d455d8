"""The chart rendered by Helm's own engine (helm-python-sdk, no cluster, no binary): the
configurations the tests cover and the pieces of a render they look at."""

from __future__ import annotations

import dataclasses
import functools
import ipaddress
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python as helm
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "tidemark"
EXAMPLES = ROOT / "helm" / "examples"
SUBMIT = EXAMPLES / "spark-submit.sh"
RELEASE = "tidemark"
NAMESPACE = "lake"
KUBE_VERSION = "1.30"
WORKLOAD_KINDS = ("Deployment", "StatefulSet")
CRD_KINDS = {
    "ServiceMonitor": "monitoring.coreos.com/v1",
    "PrometheusRule": "monitoring.coreos.com/v1",
    "Certificate": "cert-manager.io/v1",
    "SparkApplication": "sparkoperator.k8s.io/v1beta2",
}
"""Custom resources: no Kubernetes schema knows them, the tests check them by hand."""

TLS_SECRETS = {"existingSecret": "tidemark-server-tls", "clientSecret": "tidemark-client-tls"}


def production_values() -> dict[str, Any]:
    return yaml.safe_load((CHART / "values-production.yaml").read_text())


ROOTS: dict[str, Any] = {"allowedRoots": ["s3://lake/tables"]}
"""What the chart refuses to render without (or ``allowAnyRoot: true``)."""

CONFIGS: dict[str, dict[str, Any]] = {
    "default": ROOTS,
    "any-root": {"allowAnyRoot": True},
    "production": production_values(),
    "tls-existing-secret": {"tls": {"enabled": True, **TLS_SECRETS}},
    "mutual-tls": {"tls": {"enabled": True, "mutual": True, **TLS_SECRETS}},
    "tls-cert-manager": {
        "tls": {"enabled": True, "certManager": {"enabled": True, "issuerRef": {"name": "ca"}}}
    },
    "tokens": {"auth": {"enabled": True, "existingSecret": "tokens"}},
    "no-tokens": {"auth": {"enabled": False}},
    "service-monitor": {"metrics": {"serviceMonitor": {"enabled": True}}},
    "alerts-and-dashboard": {
        "metrics": {"prometheusRule": {"enabled": True}, "grafanaDashboard": {"enabled": True}}
    },
    "autoscaling": {
        "marker": {"autoscaling": {"enabled": True}},
        "planner": {"autoscaling": {"enabled": True}},
    },
    "no-network-policy": {"networkPolicy": {"enabled": False}},
    "no-pdb": {name: {"pdb": {"create": False}} for name in ("marker", "index", "planner")},
    "no-tests": {"tests": {"enabled": False}},
    "s3-secret": {"s3": {"endpoint": "http://minio:9000", "existingSecret": "s3", "region": "eu"}},
    "irsa": {
        "serviceAccount": {"annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/r"}}
    },
    "long-name": {"fullnameOverride": "a-release-name-much-longer-than-any-pod-host-name-allows"},
    "no-service-account": {"serviceAccount": {"create": False, "name": "lake"}},
    "marker-only": {"index": {"enabled": False}, "planner": {"enabled": False}},
    "no-marker": {"marker": {"enabled": False}},
    "allowlist-and-triggers": {
        "allowedRoots": ["s3://lake/a", "s3://lake/b"],
        "planner": {"tables": ["s3://lake/a/events"]},
    },
    "probe-cidrs-and-namespaces": {
        "networkPolicy": {
            "probeCIDRs": ["10.0.0.0/16"],
            "clientNamespaceLabels": {"team": "data"},
            "metricsFrom": [],
        }
    },
}
"""Every optional feature on (and, through ``default``, off), each with ``ROOTS`` unless
it names its own roots."""
CONFIGS = {
    name: values if {"allowedRoots", "allowAnyRoot"} & set(values) else ROOTS | values
    for name, values in CONFIGS.items()
}


@dataclasses.dataclass(frozen=True)
class Render:
    """One render: its objects (empty templates dropped) and its NOTES."""

    values: dict[str, Any]
    objects: list[dict[str, Any]]
    notes: str

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [item for item in self.objects if item["kind"] == kind]

    def named(self, kind: str, name: str) -> dict[str, Any]:
        (found,) = [item for item in self.of_kind(kind) if item["metadata"]["name"] == name]
        return found

    def workloads(self) -> list[dict[str, Any]]:
        return [item for item in self.objects if item["kind"] in WORKLOAD_KINDS]

    def pod_specs(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every pod the release makes: the workloads' templates and the test pods."""
        for workload in self.workloads():
            yield workload["metadata"]["name"], workload["spec"]["template"]["spec"]
        for pod in self.of_kind("Pod"):
            yield pod["metadata"]["name"], pod["spec"]

    def merged_values(self) -> dict[str, Any]:
        with helm.Chart.load(CHART) as chart:
            return chart.merge_values(self.values)


def render(values: dict[str, Any]) -> Render:
    """The chart with ``values``, as ``helm install tidemark -n lake`` would render it."""
    with helm.Chart.load(CHART) as chart:
        chart.validate_schema(values)
        templates = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    objects = [
        document
        for path, text in sorted(templates.items())
        if not path.endswith("NOTES.txt")
        for document in yaml.safe_load_all(text)
        if document
    ]
    return Render(values, objects, templates[f"{CHART.name}/templates/NOTES.txt"])


@functools.cache
def rendered(config: str) -> Render:
    """Each configuration rendered once for the whole run."""
    return render(CONFIGS[config])


def flags(args: list[str]) -> dict[str, list[str]]:
    """``--name=value`` arguments by name (repeatable flags keep every value)."""
    found: dict[str, list[str]] = {}
    for arg in args:
        if arg.startswith("--"):
            name, _, value = arg.partition("=")
            found.setdefault(name, []).append(value)
    return found


NOTES_CONF = re.compile(r"^\s*--conf (\S+?)=(\S+)$", re.MULTILINE)
NOTES_ADDRESS = re.compile(r"^\s*--(marker|index|planner)-service (\S+)$", re.MULTILINE)


def notes_spark_conf(notes: str) -> dict[str, str]:
    """The Spark settings NOTES prints, as ``key: value``."""
    return dict(NOTES_CONF.findall(notes))


def notes_addresses(notes: str) -> dict[str, str]:
    """The service addresses NOTES prints, by service."""
    return dict(NOTES_ADDRESS.findall(notes))


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(instruction, arguments) of the Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", (ROOT / "Dockerfile").read_text())
    return [
        (line.split(maxsplit=1)[0], line.split(maxsplit=1)[1])
        for line in text.splitlines()
        if line.strip() and not line.startswith("#")
    ]


def image_entrypoint() -> list[str]:
    (entrypoint,) = [
        json.loads(args) for name, args in dockerfile_instructions() if name == "ENTRYPOINT"
    ]
    return list(entrypoint)


def labels_match(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def admitted(
    release: Render,
    port_name: str,
    *,
    pod_labels: dict[str, str] | None = None,
    namespace_labels: dict[str, str] | None = None,
    ip: str | None = None,
) -> bool:
    """Whether the release's NetworkPolicy lets this source reach ``port_name`` of its pods
    (a pod with labels in a namespace with labels, or a host by IP such as the kubelet)."""
    (policy,) = release.of_kind("NetworkPolicy")
    for rule in policy["spec"]["ingress"]:
        if port_name not in [port["port"] for port in rule.get("ports", [])]:
            continue
        if "from" not in rule:
            return True
        for peer in rule["from"]:
            if "ipBlock" in peer:
                if ip and ipaddress.ip_address(ip) in ipaddress.ip_network(peer["ipBlock"]["cidr"]):
                    return True
                continue
            if pod_labels is None:
                continue
            pods = peer.get("podSelector", {}).get("matchLabels", {})
            if "namespaceSelector" in peer:
                namespaces = peer["namespaceSelector"].get("matchLabels", {})
                in_namespace = labels_match(namespaces, namespace_labels or {})
            else:
                in_namespace = namespace_labels is None  # the policy's own namespace
            if in_namespace and labels_match(pods, pod_labels):
                return True
    return False


def submitted_command() -> list[str]:
    """The spark-submit command line the script runs (bash expands it; nothing runs)."""
    script = SUBMIT.read_text().replace("spark-submit \\", "printf '%s\\n' \\", 1)
    printed = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, check=True, timeout=30
    )
    return printed.stdout.splitlines()
