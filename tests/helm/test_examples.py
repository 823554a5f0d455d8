"""helm/examples/ against the release they are written for (values-production.yaml, release
``tidemark`` in ``lake``): the spark-submit script and the SparkApplication carry exactly
the settings that release's NOTES print, their pods pass its NetworkPolicy, the token
comes from a Secret and never sits in Spark's configuration, and the job's arguments are
ones the write job accepts."""

from __future__ import annotations

import argparse
from typing import Any

import kubernetes_validate
import yaml

from tidemark.jobs.write import add_arguments

from .chart import (
    CRD_KINDS,
    EXAMPLES,
    KUBE_VERSION,
    NAMESPACE,
    admitted,
    notes_addresses,
    notes_spark_conf,
    rendered,
    submitted_command,
)

APPLICATION = EXAMPLES / "spark-application.yaml"
ENVIRONMENT = "./environment/bin/python"


def write_job_args(args: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(args)


def test_spark_submit_passes_what_notes_print() -> None:
    release = rendered("production")
    command = submitted_command()
    conf = dict(command[i + 1].split("=", 1) for i, arg in enumerate(command) if arg == "--conf")
    assert notes_spark_conf(release.notes).items() <= conf.items()
    assert conf["spark.kubernetes.namespace"] == NAMESPACE
    assert conf["spark.pyspark.python"] == ENVIRONMENT
    assert command[command.index("--archives") + 1].endswith("#environment")
    assert not [key for key in conf if "TOKEN" in key and "secretKeyRef" not in key]
    job = command.index("spark_jobs/write/__main__.py")
    args = write_job_args(command[job + 1 :])
    services = notes_addresses(release.notes)
    assert (args.marker_service, args.index_service) == (services["marker"], services["index"])


def test_the_spark_application_passes_what_notes_print() -> None:
    release = rendered("production")
    notes = notes_spark_conf(release.notes)
    application = yaml.safe_load(APPLICATION.read_text())
    assert application["apiVersion"] == CRD_KINDS[application["kind"]]
    spec = application["spec"]
    assert application["metadata"]["namespace"] == NAMESPACE
    assert spec["type"] == "Python" and spec["mode"] == "cluster"
    assert spec["sparkConf"]["spark.pyspark.python"] == ENVIRONMENT
    assert [archive.endswith("#environment") for archive in spec["deps"]["archives"]] == [True]
    assert not [key for key in spec["sparkConf"] if "TOKEN" in key]
    args = write_job_args(spec["arguments"])
    services = notes_addresses(release.notes)
    assert (args.marker_service, args.index_service) == (services["marker"], services["index"])
    for role in ("driver", "executor"):
        pod = spec[role]
        assert pod_settings(pod) == settings_for(role, notes)
        assert admitted(release, "grpc", pod_labels=pod["labels"])
        # What the operator's webhook makes of it is a valid pod.
        kubernetes_validate.validate(as_pod(pod), KUBE_VERSION, strict=True)


def pod_settings(pod: dict[str, Any]) -> dict[str, str]:
    """A SparkApplication pod's labels, mounted secrets and env in NOTES' terms."""
    settings = {f"label.{key}": value for key, value in pod["labels"].items()}
    for secret in pod.get("secrets", []):
        assert secret["secretType"] == "Generic"
        settings[f"secrets.{secret['name']}"] = secret["path"]
    for item in pod.get("env", []):
        if "valueFrom" in item:
            ref = item["valueFrom"]["secretKeyRef"]
            settings[f"secretKeyRef.{item['name']}"] = f"{ref['name']}:{ref['key']}"
        else:
            settings[f"env.{item['name']}"] = item["value"]
    return settings


def settings_for(role: str, notes: dict[str, str]) -> dict[str, str]:
    """NOTES' settings for the driver or the executors, in the same terms."""
    settings = {}
    env_prefix = "spark.kubernetes.driverEnv." if role == "driver" else "spark.executorEnv."
    for key, value in notes.items():
        if key.startswith(env_prefix):
            settings[f"env.{key.removeprefix(env_prefix)}"] = value
        elif key.startswith(f"spark.kubernetes.{role}."):
            settings[key.removeprefix(f"spark.kubernetes.{role}.")] = value
    return settings


def as_pod(pod: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "spark", "labels": pod["labels"]},
        "spec": {
            "containers": [{"name": "spark", "image": "spark", "env": pod["env"]}],
            "volumes": [
                {"name": secret["name"], "secret": {"secretName": secret["name"]}}
                for secret in pod["secrets"]
            ],
        },
    }
