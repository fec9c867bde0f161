"""The Kubeflow Spark operator on a test cluster, and the page-view job run by it as a SparkApplication.

The operator is built from its Go module (e2e/localkube/build-tools.sh spark-operator: the binary and the Helm
chart the module holds, cached), its image is the krafty Spark image plus that binary
(e2e/images/spark-operator/Dockerfile), and it is installed with its own chart. The SparkApplication is
spark/k8s/spark-application.yaml, renamed and pointed at a cluster, with the arguments a test gives it.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import yaml

from krafty_testkit.k8s_kafka import SPARK_IMAGE
from krafty_testkit.kube import LOCALKUBE, ROOT, Image, KubeCluster, tools_dir
from krafty_testkit.waiting import wait_for

RELEASE = "spark-operator"
NAMESPACE = "spark-operator"
# (the chart names its image registry/repository:tag)
IMAGE_REGISTRY, IMAGE_REPOSITORY, IMAGE_TAG = "krafty", "spark-operator", "e2e"
DOCKERFILE = ROOT / "e2e" / "images" / "spark-operator" / "Dockerfile"
APPLICATION = ROOT / "spark" / "k8s" / "spark-application.yaml"
SUBMIT_RBAC = ROOT / "spark" / "k8s" / "spark-operator-rbac.yaml"
JOB_LABEL = "spark.krafty.io/job"


def pinned_version() -> str:
    for line in (LOCALKUBE / "versions.env").read_text().splitlines():
        if line.startswith("SPARK_OPERATOR_VERSION="):
            return line.split("=", 1)[1].strip()
    raise RuntimeError("SPARK_OPERATOR_VERSION is not pinned in e2e/localkube/versions.env")


def build_dir() -> Path:
    """The folder holding the operator's binary and chart, built first if missing (minutes, once)."""
    tools_dir("spark-operator")
    cache = Path(os.environ.get("KRAFTY_CACHE", Path.home() / ".cache" / "krafty"))
    return cache / "localkube" / "tools" / f"spark-operator-{pinned_version()}"


def image() -> Image:
    """The operator's image: built after SPARK_IMAGE, from it (load both, the Spark image first)."""
    return Image(f"{IMAGE_REGISTRY}/{IMAGE_REPOSITORY}:{IMAGE_TAG}", DOCKERFILE, build_dir())


def image_digest() -> str:
    """What the operator's image is made of (the tag stays e2e): pods carry it, so a changed image replaces them."""
    digest = hashlib.sha256(pinned_version().encode())
    for path in (DOCKERFILE, SPARK_IMAGE.dockerfile, ROOT / "spark" / "requirements.txt"):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def install(kube: KubeCluster, job_namespaces: tuple[str, ...]) -> None:
    """helm upgrade --install of the operator's own chart (controller and webhook) with the local image, watching
    job_namespaces. Its CRDs first, applied as for an upgrade (Helm installs CRDs only on a first install). The
    chart's ServiceAccount and Role for Spark jobs are left out: the job brings its own (spark/k8s/rbac.yaml).
    In each job namespace, the right the chart does not give its controller and Spark 4.2's spark-submit needs
    (spark/k8s/spark-operator-rbac.yaml: NetworkPolicies)."""
    for namespace in job_namespaces:
        kube.kubectl("apply", "-n", namespace, "-f", str(SUBMIT_RBAC))
    chart = build_dir() / "chart"
    kube.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(chart / "crds"))
    digest = image_digest()
    kube.run_helm("upgrade", "--install", RELEASE, str(chart), "--namespace", NAMESPACE, "--create-namespace",
                  "--set", f"image.registry={IMAGE_REGISTRY}", "--set", f"image.repository={IMAGE_REPOSITORY}",
                  "--set", f"image.tag={IMAGE_TAG}",
                  "--set", f"spark.jobNamespaces={{{','.join(job_namespaces)}}}",
                  "--set", "spark.serviceAccount.create=false", "--set", "spark.rbac.create=false",
                  "--set-string", f"controller.annotations.krafty-e2e/image={digest}",
                  "--set-string", f"webhook.annotations.krafty-e2e/image={digest}",
                  "--wait", "--timeout", "5m", timeout=420)
    wait_webhook(kube, job_namespaces[0])


def wait_webhook(kube: KubeCluster, namespace: str, timeout: float = 180) -> None:
    """Waits until the API server can call the operator's webhooks: a server-side dry run of a SparkApplication
    passes them. Ready pods are not enough: the webhook serves at once, but writes its CA into the webhook
    configurations only once it leads (controller-runtime's leader election), and until then every SparkApplication
    is refused (`x509: certificate signed by unknown authority`); a lease left by an uninstalled release delays
    that by its duration."""
    probe = application("webhook-probe", "none", SPARK_IMAGE.name, {})
    wait_for(lambda: kube.kubectl("create", "--dry-run=server", "-n", namespace, "-f", "-", stdin=json.dumps(probe)),
             bool, timeout, "the Spark operator's webhooks to answer the API server", interval=2)


def uninstall(kube: KubeCluster, job_namespaces: tuple[str, ...]) -> None:
    """helm uninstall, its namespace, and the NetworkPolicy right in each job namespace (the CRDs stay, as Helm
    leaves them)."""
    kube.run_helm("uninstall", RELEASE, "--namespace", NAMESPACE, "--ignore-not-found", "--wait", timeout=300)
    kube.kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=true", timeout=300)
    for namespace in job_namespaces:
        kube.kubectl("delete", "-n", namespace, "--ignore-not-found", "-f", str(SUBMIT_RBAC))


def application(name: str, cluster: str, image_name: str, options: dict[str, str | None]) -> dict[str, Any]:
    """spark/k8s/spark-application.yaml for job `name` on KafkaCluster `cluster`: its name, labels, the
    KafkaUser Secret it would run as, the cluster's connection ConfigMap and CA, the image and the job options
    given (`{"--input-topics": "t"}`; None leaves the file's out) changed; everything else (trigger, window,
    Spark settings, restart policy, resources) as the file says."""
    app: dict[str, Any] = copy.deepcopy(yaml.safe_load(APPLICATION.read_text()))
    app["metadata"]["name"] = name
    spec = app["spec"]
    spec["image"] = image_name
    kept = [arg for arg in spec["arguments"] if arg.split("=", 1)[0] not in options]
    spec["arguments"] = kept + [f"{option}={value}" for option, value in options.items() if value is not None]
    for role in ("driver", "executor"):
        spec[role]["labels"][JOB_LABEL] = name
    for term in spec["executor"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]:
        term["labelSelector"]["matchLabels"][JOB_LABEL] = name
    volumes = {volume["name"]: volume for volume in spec["volumes"]}
    volumes["kafka-connection"]["configMap"]["name"] = f"{cluster}-kafka-connection"
    volumes["kafka-ca"]["secret"]["secretName"] = f"{cluster}-cluster-ca-cert"
    volumes["kafka-user"]["secret"]["secretName"] = name
    return app


def state(kube: KubeCluster, namespace: str, name: str) -> dict[str, Any]:
    """The SparkApplication's status (applicationState.state, driverInfo, executorState, ...)."""
    app = kube.kubectl_json("get", "sparkapplication", name, "-n", namespace)
    return dict(app.get("status") or {})


def pods(kube: KubeCluster, namespace: str, name: str, role: str) -> list[dict[str, Any]]:
    """The job's running driver or executor pods, oldest first."""
    items = kube.kubectl_json("get", "pods", "-n", namespace, "-l", f"{JOB_LABEL}={name},spark-role={role}",
                              "--field-selector", "status.phase=Running")["items"]
    return sorted(items, key=lambda p: p["metadata"]["creationTimestamp"])


def wait_running(kube: KubeCluster, namespace: str, name: str, timeout: float = 600) -> dict[str, Any]:
    """Waits for the application RUNNING with a running executor; returns its status."""
    def observe() -> dict[str, Any]:
        status = state(kube, namespace, name)
        return {"state": status.get("applicationState", {}), "executors": status.get("executorState", {}),
                "running executor pods": len(pods(kube, namespace, name, "executor"))}

    return wait_for(observe, lambda s: s["state"].get("state") == "RUNNING" and s["running executor pods"] > 0,
                    timeout, f"SparkApplication {name} running with an executor", interval=3)


def driver_metrics(kube: KubeCluster, namespace: str, pod: str, path: str = "/metrics/prometheus") -> str:
    """What a Prometheus scraping the driver pod reads (through the API server's pod proxy)."""
    return kube.kubectl("get", "--raw", f"/api/v1/namespaces/{namespace}/pods/{pod}:4040/proxy{path}")


def prometheus_samples(text: str) -> dict[str, float]:
    """Prometheus text format to {series (name and labels): value}."""
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, _, value = line.rpartition(" ")
            samples[series] = float(value)
    return samples


def delete(kube: KubeCluster, namespace: str, name: str) -> None:
    kube.kubectl("delete", "sparkapplication", name, "-n", namespace, "--ignore-not-found", "--wait=true",
                 timeout=300)
    kube.kubectl("delete", "pods", "-n", namespace, "-l", f"{JOB_LABEL}={name}", "--ignore-not-found",
                 "--wait=true", timeout=300)
