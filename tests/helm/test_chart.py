"""helm/tidemark rendered offline in every configuration: lint-clean, valid against the
Kubernetes schemas, every pod "restricted", ports and probes agreeing with ``tidemark
serve``'s flags, selectors matching labels, the network policy admitting the clients and
the probes only, bad values refused naming the value."""

from __future__ import annotations

import base64
import re
import runpy
from collections.abc import Iterator
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

from tidemark.cli import build_parser
from tidemark.services.index import FULL_NAME as INDEX_SERVICE
from tidemark.services.marker import FULL_NAME as MARKER_SERVICE
from tidemark.services.planner import FULL_NAME as PLANNER_SERVICE

from .chart import (
    CHART,
    CONFIGS,
    CRD_KINDS,
    KUBE_VERSION,
    NAMESPACE,
    ROOT,
    ROOTS,
    Render,
    admitted,
    flags,
    labels_match,
    notes_addresses,
    notes_spark_conf,
    render,
    rendered,
)

GRPC_SERVICES = {"marker": MARKER_SERVICE, "index": INDEX_SERVICE, "planner": PLANNER_SERVICE}
RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
    "projected", "secret",
}  # fmt: skip
"""The volume types Pod Security "restricted" allows."""


@pytest.fixture(params=sorted(CONFIGS))
def release(request: pytest.FixtureRequest) -> Render:
    return rendered(request.param)


def containers(release: Render) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(component, pod spec, container) of every service workload."""
    for workload in release.workloads():
        spec = workload["spec"]["template"]["spec"]
        for container in spec["containers"]:
            yield container["name"], spec, container


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_lint_strict_finds_nothing_above_info(config: str) -> None:
    report = helm.lint(CHART, CONFIGS[config], strict=True, kube_version=f"v{KUBE_VERSION}.0")
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []
    assert report["total_charts_linted"] == 1


def test_every_object_is_valid_kubernetes(release: Render) -> None:
    for item in release.objects:
        if item["kind"] in CRD_KINDS:
            assert item["apiVersion"] == CRD_KINDS[item["kind"]]
            continue
        kubernetes_validate.validate(item, KUBE_VERSION, strict=True)
        assert item["metadata"]["namespace"] == NAMESPACE


def test_the_custom_resources_have_the_fields_their_operators_read() -> None:
    (monitor,) = rendered("service-monitor").of_kind("ServiceMonitor")
    assert monitor["spec"]["endpoints"] == [
        {"port": "metrics", "path": "/metrics", "interval": "30s"}
    ]
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    for service in rendered("service-monitor").of_kind("Service"):
        assert labels_match(
            monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"]
        )
        assert "metrics" in [port["name"] for port in service["spec"]["ports"]]
    server, client = rendered("tls-cert-manager").of_kind("Certificate")
    for certificate in (server, client):
        spec = certificate["spec"]
        assert spec["secretName"] == certificate["metadata"]["name"]
        assert spec["issuerRef"] == {"name": "ca", "kind": "Issuer", "group": "cert-manager.io"}
        assert re.fullmatch(r"\d+h", spec["duration"])
        assert re.fullmatch(r"\d+h", spec["renewBefore"])
    assert "server auth" in server["spec"]["usages"]
    assert "client auth" in client["spec"]["usages"]


def test_every_pod_meets_pod_security_restricted(release: Render) -> None:
    pods = list(release.pod_specs())
    assert pods
    for name, spec in pods:
        context = spec["securityContext"]
        assert context["runAsNonRoot"] is True, name
        assert context["runAsUser"] != 0, name
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}, name
        for key in ("hostNetwork", "hostPID", "hostIPC"):
            assert not spec.get(key), name
        volumes = {volume["name"]: volume for volume in spec.get("volumes", [])}
        for volume in volumes.values():
            assert set(volume) - {"name"} <= RESTRICTED_VOLUMES, name
        for container in spec["containers"] + spec.get("initContainers", []):
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False, name
            assert security["capabilities"] == {"drop": ["ALL"]}, name
            assert security["readOnlyRootFilesystem"] is True, name
            assert not security.get("privileged"), name
            assert all("hostPort" not in port for port in container.get("ports", [])), name
            (tmp,) = [mount for mount in container["volumeMounts"] if mount["mountPath"] == "/tmp"]
            assert "emptyDir" in volumes[tmp["name"]], name
            assert container["resources"]["limits"] and container["resources"]["requests"]


def test_ports_and_probes_agree_with_the_server_flags(release: Render) -> None:
    values = release.merged_values()
    for component, _, container in containers(release):
        args = container["args"]
        assert args[0] == component
        # Parsed as `tidemark serve` parses them: an unknown flag or bad value exits 2.
        build_parser("serve").parse_args(["serve", *args])
        given = flags(args)
        ports = {port["name"]: port["containerPort"] for port in container["ports"]}
        metrics = int(given["--metrics-port"][0])
        workers = int(given.get("--workers", ["1"])[0])  # worker i: /metrics on metrics + i
        assert ports == {
            "grpc": int(given["--port"][0]),
            "metrics": metrics,
            "health": int(given["--health-port"][0]),
            **{f"metrics-w{worker}": metrics + worker for worker in range(1, workers)},
            **({"bulk": int(given["--bulk-port"][0])} if "--bulk-port" in given else {}),
        }
        assert ports["grpc"] == values[component]["port"]
        assert ports.get("bulk") == values[component].get("bulkPort")  # none: the planner
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert container[probe]["grpc"]["port"] == ports["health"]
        assert container["readinessProbe"]["grpc"]["service"] == GRPC_SERVICES[component]
        assert container["livenessProbe"]["grpc"]["service"] == ""
        assert given["--host"] == ["0.0.0.0"]
        tls = values["tls"]["enabled"]
        assert ("--tls-cert" in given) == tls and ("--tls-key" in given) == tls
        assert ("--tls-client-ca" in given) == values["tls"]["mutual"]
        assert ("--auth-token-file" in given) == values["auth"]["enabled"]
        assert given.get("--allowed-root", []) == values["allowedRoots"]
        service = release.named("Service", container_service_name(release, component))
        service_ports = {port["name"]: port for port in service["spec"]["ports"]}
        # Headless: clients dial the pod's own port, so the Service's must be the same.
        assert service_ports["grpc"]["port"] == ports["grpc"]
        assert {name: port["port"] for name, port in service_ports.items()} == {
            name: number for name, number in ports.items() if name != "health"
        }
        assert {port["targetPort"] for port in service_ports.values()} <= set(ports)


def container_service_name(release: Render, component: str) -> str:
    (spec,) = [
        item["spec"]["template"]
        for item in release.workloads()
        if item["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]
        == component
    ]
    return str(spec["spec"]["subdomain"])


def test_selectors_match_labels(release: Render) -> None:
    pods = {
        item["metadata"]["name"]: item["spec"]["template"]["metadata"]["labels"]
        for item in release.workloads()
    }
    for workload in release.workloads():
        template = workload["spec"]["template"]
        assert labels_match(
            workload["spec"]["selector"]["matchLabels"], template["metadata"]["labels"]
        )
        # The pod's DNS name <pod>.<subdomain> needs a headless Service of that name.
        service = release.named("Service", template["spec"]["subdomain"])
        assert service["spec"]["clusterIP"] == "None"
        if workload["kind"] == "StatefulSet":
            assert workload["spec"]["serviceName"] == service["metadata"]["name"]
    for kind in ("Service", "PodDisruptionBudget"):
        for item in release.of_kind(kind):
            selector = item["spec"]["selector"]
            selector = selector.get("matchLabels", selector)
            matched = [name for name, labels in pods.items() if labels_match(selector, labels)]
            assert matched == [item["metadata"]["name"]]
            for test_pod in release.of_kind("Pod"):  # never behind a Service or a budget
                assert not labels_match(selector, test_pod["metadata"]["labels"])
    for autoscaler in release.of_kind("HorizontalPodAutoscaler"):
        reference = autoscaler["spec"]["scaleTargetRef"]
        target = release.named(reference["kind"], reference["name"])
        assert "replicas" not in target["spec"]
    for policy in release.of_kind("NetworkPolicy"):
        selector = policy["spec"]["podSelector"]["matchLabels"]
        assert all(labels_match(selector, labels) for labels in pods.values())


def test_pod_host_names_fit_a_dns_label(release: Render) -> None:
    """A pod's host name is its name, which its advertised address and the certificate's
    wildcard rely on: a Deployment's pods add 17 characters (ReplicaSet hash, suffix), a
    StatefulSet's its ordinal."""
    most = {
        autoscaler["spec"]["scaleTargetRef"]["name"]: autoscaler["spec"]["maxReplicas"]
        for autoscaler in release.of_kind("HorizontalPodAutoscaler")
    }
    for workload in release.workloads():
        name = workload["metadata"]["name"]
        replicas = most.get(name) or workload["spec"]["replicas"]
        added = 17 if workload["kind"] == "Deployment" else 1 + len(str(replicas - 1))
        assert len(name) + added <= 63, name


def test_bad_values_are_refused_naming_the_value() -> None:
    refused: dict[str, dict[str, Any]] = {
        "/marker/replicaCount": {"marker": {"replicaCount": -1}},
        "/logLevel": {"logLevel": "loud"},
        "/index/port": {"index": {"port": 70000}},
        "tls.existingSecret": {"tls": {"enabled": True}},
        "tls.clientSecret": {"tls": {"enabled": True, "existingSecret": "s"}},
        "tls.mutual": {"tls": {"mutual": True}},
        "tls.certManager.issuerRef.name": {
            "tls": {"enabled": True, "certManager": {"enabled": True}}
        },
        "healthPort": {"healthPort": 50052},
        "index.workers": {"index": {"workers": 3, "metricsPort": 50050}},
        "marker.autoscaling.minReplicas": {
            "marker": {"autoscaling": {"enabled": True, "minReplicas": 5, "maxReplicas": 2}}
        },
        "marker.enabled": {name: {"enabled": False} for name in ("marker", "index", "planner")},
    }
    for named, values in refused.items():
        with pytest.raises((helm.HelmValuesError, helm.HelmRenderError), match=re.escape(named)):
            render(ROOTS | values)
    for named, values in {
        "allowedRoots": {},
        "allowAnyRoot": {"allowAnyRoot": True, "allowedRoots": ["s3://lake"]},
    }.items():
        with pytest.raises(helm.HelmRenderError, match=re.escape(f"{named}: ")):
            render(values)


def values_leaves(values: dict[str, Any], prefix: str = "") -> Iterator[str]:
    """Dotted paths of the values a user sets (maps with keys are walked into)."""
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and not key.endswith(("Labels", "resources")):
            yield from values_leaves(value, f"{path}.")
        else:
            yield path


def test_every_value_is_documented_and_in_the_schema() -> None:
    text = (CHART / "values.yaml").read_text()
    documented = set(re.findall(r"^## @param (\S+) \S", text, re.MULTILINE))
    leaves = set(values_leaves(yaml.safe_load(text)))
    assert documented == leaves
    with helm.Chart.load(CHART) as chart:
        schema = chart.schema
    assert schema is not None
    for leaf in leaves:
        node: dict[str, Any] = schema
        for key in leaf.split("."):
            node = node["properties"][key]
        assert node, leaf


def test_the_chart_readme_lists_every_value() -> None:
    """helm/tidemark/README.md's Parameters tables are generated from values.yaml
    (``python scripts/chart_reference.py`` rewrites them)."""
    regenerate = runpy.run_path(str(ROOT / "scripts" / "chart_reference.py"))["regenerate"]
    readme = (CHART / "README.md").read_text()
    values = (CHART / "values.yaml").read_text()
    assert readme == regenerate(readme, values), "stale: run python scripts/chart_reference.py"
    for name in values_leaves(yaml.safe_load(values)):
        assert f"| `{name}` |" in readme


def test_optional_objects_follow_their_values() -> None:
    def kinds(config: str) -> list[str]:
        return sorted(item["kind"] for item in rendered(config).objects)

    default = kinds("default")
    assert default == sorted(
        ["Deployment", "StatefulSet", "StatefulSet", "NetworkPolicy", "Pod", "ServiceAccount"]
        + ["Secret"] + ["Service"] * 3 + ["PodDisruptionBudget"] * 3
    )  # fmt: skip
    assert kinds("no-tokens") == [kind for kind in default if kind != "Secret"]
    assert kinds("tokens") == [kind for kind in default if kind != "Secret"]
    assert kinds("service-monitor") == sorted([*default, "ServiceMonitor"])
    assert kinds("alerts-and-dashboard") == sorted([*default, "ConfigMap", "PrometheusRule"])
    assert kinds("autoscaling") == sorted([*default, *["HorizontalPodAutoscaler"] * 2])
    assert kinds("tls-cert-manager") == sorted([*default, "Certificate", "Certificate"])
    assert kinds("no-network-policy") == [kind for kind in default if kind != "NetworkPolicy"]
    assert kinds("no-pdb") == [kind for kind in default if kind != "PodDisruptionBudget"]
    assert kinds("no-tests") == [kind for kind in default if kind != "Pod"]
    assert kinds("no-service-account") == [kind for kind in default if kind != "ServiceAccount"]
    marker_only = rendered("marker-only")
    assert [item["metadata"]["name"] for item in marker_only.workloads()] == ["tidemark-marker"]
    assert list(notes_addresses(marker_only.notes)) == ["marker"]
    for config, automount in (("default", False), ("irsa", True)):
        for _, spec, _ in containers(rendered(config)):
            assert spec["automountServiceAccountToken"] is automount
        (test_pod,) = rendered(config).of_kind("Pod")
        assert test_pod["spec"]["automountServiceAccountToken"] is False


def test_storage_settings_reach_every_service_container() -> None:
    for component, _, container in containers(rendered("s3-secret")):
        env = {item["name"]: item for item in container["env"]}
        assert env["AWS_ENDPOINT_URL"]["value"] == "http://minio:9000", component
        assert env["AWS_DEFAULT_REGION"]["value"] == "eu"
        assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"] == {
            "name": "s3", "key": "AWS_SECRET_ACCESS_KEY"
        }  # fmt: skip
    (planner,) = [
        c for name, _, c in containers(rendered("allowlist-and-triggers")) if name == "planner"
    ]
    assert {"name": "TIDEMARK_PLANNER_TABLES", "value": "s3://lake/a/events"} in planner["env"]


def test_the_network_policy_admits_the_client_label_and_the_probes_only() -> None:
    for config in ("default", "production", "probe-cidrs-and-namespaces"):
        release = rendered(config)
        client = release.merged_values()["networkPolicy"]["clientLabels"]
        namespace = release.merged_values()["networkPolicy"]["clientNamespaceLabels"] or None
        assert admitted(release, "grpc", pod_labels=client, namespace_labels=namespace)
        assert admitted(release, "health", pod_labels=client, namespace_labels=namespace)
        assert not admitted(
            release, "grpc", pod_labels={"app": "other"}, namespace_labels=namespace
        )
        assert not admitted(release, "grpc", ip="10.0.3.4")
        assert not admitted(release, "metrics", ip="10.0.3.4")
        assert not admitted(release, "health", pod_labels={"app": "other"}, namespace_labels={})
        (test_pod,) = release.of_kind("Pod")
        assert admitted(
            release, "grpc", pod_labels=test_pod["metadata"]["labels"], namespace_labels=namespace
        )
    for config in ("production", "probe-cidrs-and-namespaces"):
        assert admitted(rendered(config), "health", ip="10.0.3.4")  # a node of the probe CIDRs
    default = rendered("default")
    assert not admitted(default, "health", ip="10.0.3.4")  # the pod's own node only
    prometheus = {"kubernetes.io/metadata.name": "monitoring"}
    assert admitted(
        default, "metrics", pod_labels={"app": "prometheus"}, namespace_labels=prometheus
    )
    assert not admitted(default, "metrics", pod_labels={"app": "x"}, namespace_labels={"a": "b"})
    limited = rendered("probe-cidrs-and-namespaces")
    assert not admitted(
        limited, "metrics", pod_labels={"app": "prometheus"}, namespace_labels=prometheus
    )
    assert not admitted(limited, "health", ip="192.168.1.1")
    assert not admitted(
        limited, "grpc", pod_labels={"tidemark-client": "true"}
    )  # no namespace label
    assert admitted(
        limited, "grpc", pod_labels={"tidemark-client": "true"}, namespace_labels={"team": "data"}
    )


def host_matches(pattern: str, host: str) -> bool:
    """A certificate DNS name (``*.`` covers exactly one label) against a host."""
    if pattern.startswith("*."):
        first, _, rest = host.partition(".")
        return bool(first) and rest == pattern[2:]
    return pattern == host


@pytest.mark.parametrize("config", ["production", "tls-cert-manager"])
def test_the_certificate_names_every_host_clients_dial(config: str) -> None:
    release = rendered(config)
    server = release.named("Certificate", "tidemark-tls")
    dial = [
        address.removeprefix("dns:///").rpartition(":")[0]
        for addresses in notes_addresses(release.notes).values()
        for address in addresses.split(",")
    ]
    assert len(dial) == 2 + release.merged_values()["index"]["replicaCount"]
    for component, _, container in containers(release):
        advertised = flags(container["args"])["--advertise-address"][0]
        dial.append(
            advertised.replace("$(POD_NAME)", f"tidemark-{component}-6d4cf-x2x9z").rpartition(":")[
                0
            ]
        )
    for host in dial:
        assert any(host_matches(name, host) for name in server["spec"]["dnsNames"]), host


def test_notes_name_each_index_replica_and_the_spark_settings() -> None:
    release = rendered("production")
    addresses = notes_addresses(release.notes)
    assert addresses["marker"] == f"dns:///tidemark-marker.{NAMESPACE}.svc.cluster.local:50051"
    assert addresses["index"].split(",") == [
        f"tidemark-index-{i}.tidemark-index.{NAMESPACE}.svc.cluster.local:50052" for i in range(3)
    ]
    conf = notes_spark_conf(release.notes)
    for role in ("driver", "executor"):
        assert conf[f"spark.kubernetes.{role}.label.tidemark-client"] == "true"
        assert (
            conf[f"spark.kubernetes.{role}.secretKeyRef.TIDEMARK_CLIENT_TOKEN"]
            == "tidemark-tokens:token"
        )
        assert (
            conf[f"spark.kubernetes.{role}.secrets.tidemark-client-tls"]
            == "/etc/tidemark/client-tls"
        )
    assert (
        conf["spark.executorEnv.TIDEMARK_CLIENT_TLS_CA_PATH"] == "/etc/tidemark/client-tls/ca.crt"
    )
    assert not [
        key for key in conf if key.endswith("TIDEMARK_CLIENT_TOKEN") and "secretKeyRef" not in key
    ]
    assert notes_spark_conf(rendered("no-tokens").notes) == {
        "spark.kubernetes.driver.label.tidemark-client": "true",
        "spark.kubernetes.executor.label.tidemark-client": "true",
    }
    default = notes_spark_conf(rendered("default").notes)
    for role in ("driver", "executor"):
        assert default[f"spark.kubernetes.{role}.secretKeyRef.TIDEMARK_CLIENT_TOKEN"] == (
            "tidemark-tokens:token"
        )


def test_tokens_are_on_by_default_from_a_secret_the_chart_makes() -> None:
    """One random token for every root and role, what the servers mount and what NOTES
    hands the Spark pods; each offline render draws another (an install or upgrade keeps
    the cluster's, through ``lookup``)."""
    release = rendered("default")
    secret = release.named("Secret", "tidemark-tokens")
    data = {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}
    assert re.fullmatch(r"[A-Za-z0-9]{48}", data["token"])
    assert data["tokens"] == f"{data['token']} name=chart-generated\n"
    for _, spec, container in containers(release):
        (mounted,) = [volume for volume in spec["volumes"] if volume["name"] == "auth"]
        assert mounted["secret"]["secretName"] == "tidemark-tokens"
        assert flags(container["args"])["--auth-token-file"] == ["/etc/tidemark/auth/tokens"]
    again = render(ROOTS).named("Secret", "tidemark-tokens")
    assert again["data"]["token"] != secret["data"]["token"]


def test_marker_replicas_advertise_names_the_cluster_resolves(release: Render) -> None:
    """Kubernetes publishes ``<pod>.<service>`` only for pods with a hostname, which a
    StatefulSet gives its pods: the marker's advertised address is that name."""
    markers = [item for item in release.workloads() if item["metadata"]["name"].endswith("marker")]
    for workload in markers:
        assert workload["kind"] == "StatefulSet"
        (container,) = workload["spec"]["template"]["spec"]["containers"]
        (advertised,) = flags(container["args"])["--advertise-address"]
        host = advertised.rpartition(":")[0]
        service = workload["spec"]["serviceName"]
        assert host == f"$(POD_NAME).{service}.{NAMESPACE}.svc.cluster.local"
        assert release.named("Service", service)["spec"]["clusterIP"] == "None"
