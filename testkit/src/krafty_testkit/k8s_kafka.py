"""Driving krafty on a Kubernetes cluster: the product's images, the operator installed with
Helm, KafkaClusters, an in-cluster client pod, and Kafka's own tools inside the brokers.
The end-to-end tests and the demo (scripts/demo.py) both use it."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from krafty_testkit.kafka_dist import pinned_kafka_versions, pinned_versions
from krafty_testkit.kube import ROOT, Image, KubeCluster
from krafty_testkit.waiting import wait_for

NAMESPACE = "kafka-e2e"
OPERATOR_NAMESPACE = "krafty-system"
TENANT_NAMESPACE = "tenant-e2e"  # another tenant's namespace the operator watches (test_19_tenants.py)
RELEASE = "krafty"
CHART = ROOT / "charts" / "krafty-operator"
KAFKA_VERSIONS = pinned_kafka_versions()  # oldest first; the last one is the default
BROKER_IMAGES = {version: f"krafty/kafka:{version}" for version in KAFKA_VERSIONS}
BROKER_IMAGE = BROKER_IMAGES[pinned_versions()["KAFKA_VERSION"]]
OPERATOR_IMAGE = "krafty/operator:e2e"
CLIENT_IMAGE = "krafty/kafka-client:e2e"
IMAGES = [
    Image(OPERATOR_IMAGE, ROOT / "Dockerfile", ROOT),
    *(Image(image, ROOT / "broker-image" / "Dockerfile", ROOT, (f"KAFKA_VERSION={version}",))
      for version, image in BROKER_IMAGES.items()),
    Image(CLIENT_IMAGE, ROOT / "e2e" / "images" / "kafka-client" / "Dockerfile", ROOT),
]
SPARK_IMAGE = Image("krafty/spark:e2e", ROOT / "spark" / "Dockerfile", ROOT)
SMALL_NODE = {"resources": {"requests": {"cpu": "50m", "memory": "640Mi"}, "limits": {"memory": "640Mi"}},
              "jvm": {"heap": "256Mi"}, "storage": {"size": "1Gi"}}


def operator_sources_digest() -> str:
    """A digest of what the operator image is built from: the image tag stays e2e, so the pod carries this to
    be replaced whenever the code changed (a running operator on an older image otherwise stays)."""
    digest = hashlib.sha256()
    for path in sorted([ROOT / "Dockerfile", ROOT / "operator" / "requirements.txt",
                        *(ROOT / "operator" / "src").rglob("*.py"), *(ROOT / "operator" / "src").rglob("*.json")]):
        digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def install_operator(kube: KubeCluster, release: str = RELEASE, namespace: str = OPERATOR_NAMESPACE,
                     watch: tuple[str, ...] = (NAMESPACE, TENANT_NAMESPACE), *extra: str) -> None:
    """helm upgrade --install of the chart with the locally built operator image, after its CRDs (Helm installs
    them only on a first install, so a kept cluster would keep older ones: applied as the README tells users)."""
    kube.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CHART / "crds"))
    watched = ",".join(watch)
    kube.run_helm("upgrade", "--install", release, str(CHART), "--namespace", namespace, "--create-namespace",
                  "--set", "image.repository=krafty/operator", "--set", "image.tag=e2e",
                  "--set-string", f"podAnnotations.krafty-e2e/sources={operator_sources_digest()}",
                  "--set", f"watchNamespaces={{{watched}}}", "--set", "rackAwareness.enabled=true",
                  "--wait", "--timeout", "5m", *extra, timeout=420)


def operator_leader(kube: KubeCluster, lease: str = RELEASE, namespace: str = OPERATOR_NAMESPACE) -> str | None:
    """Who holds the operator's leader Lease (the replica that acts: <pod>_<process mark>), or None."""
    found = kube.kubectl("get", "lease", lease, "-n", namespace, "--ignore-not-found",
                         "-o", "jsonpath={.spec.holderIdentity}")
    return found.strip() or None


def pod_of(identity: str) -> str:
    """The pod of a Lease holder's identity."""
    return identity.rsplit("_", 1)[0]


def leader_metrics_text(kube: KubeCluster, release: str = RELEASE, namespace: str = OPERATOR_NAMESPACE) -> str:
    """The leading operator replica's /metrics (a standby publishes no cluster, topic or lag series), read inside
    its pod (the operator's NetworkPolicy lets only Prometheus scrape it from outside)."""
    holder = operator_leader(kube, release, namespace)
    assert holder is not None, "no operator leads"
    return kube.kubectl("exec", "-n", namespace, pod_of(holder), "-c", "operator", "--", "python3", "-c",
                        "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen("
                        "'http://127.0.0.1:8080/metrics', timeout=20).read().decode())", timeout=60)


def cluster_spec(mode: str, brokers: int = 3, controllers: int = 3, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "brokers": {"replicas": brokers, **SMALL_NODE},
        "controllers": {"mode": mode, "replicas": controllers},
        "restarts": {"gracePeriodSeconds": 120},
        **extra,
    }
    if mode == "dedicated":
        spec["controllers"].update({**SMALL_NODE, "resources": {"requests": {"cpu": "50m", "memory": "512Mi"},
                                                                "limits": {"memory": "512Mi"}},
                                    "jvm": {"heap": "192Mi"}})
    return spec


@dataclass
class KafkaClusterHandle:
    kube: KubeCluster
    name: str
    namespace: str = NAMESPACE

    @property
    def bootstrap(self) -> str:
        return self.bootstrap_at(9092)

    def bootstrap_at(self, port: int) -> str:
        """The bootstrap Service's address at one listener's port."""
        return f"{self.name}-kafka-bootstrap.{self.namespace}.svc.cluster.local:{port}"

    def apply(self, spec: dict[str, Any], annotations: dict[str, str] | None = None) -> None:
        meta: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if annotations:
            meta["annotations"] = annotations
        body = {"apiVersion": "kafka.krafty.io/v1alpha1", "kind": "KafkaCluster", "metadata": meta, "spec": spec}
        self.kube.kubectl("apply", "--server-side", "--force-conflicts", "--field-manager", "e2e", "-f", "-",
                          stdin=json.dumps(body))

    def patch_spec(self, patch: dict[str, Any]) -> None:
        self.kube.kubectl("patch", "kafkacluster", self.name, "-n", self.namespace, "--type", "merge",
                          "-p", json.dumps({"spec": patch}))

    def get(self) -> dict[str, Any]:
        return dict(self.kube.kubectl_json("get", "kafkacluster", self.name, "-n", self.namespace))

    def status(self) -> dict[str, Any]:
        return dict(self.get().get("status") or {})

    def condition(self, kind: str) -> dict[str, Any]:
        return next((c for c in self.status().get("conditions", []) if c["type"] == kind), {})

    def summary(self) -> str:
        status = self.status()
        conditions = {c["type"]: f"{c['status']} {c.get('reason')}: {c.get('message')}"
                      for c in status.get("conditions", [])}
        return json.dumps({"conditions": conditions, "roll": status.get("roll"), "scaling": status.get("scaling"),
                           "readyBrokers": status.get("readyBrokers")})

    def wait_ready(self, timeout: float = 600) -> float:
        """Waits for Ready=True with nothing left to roll; returns the seconds it took."""
        began = time.monotonic()

        def settled(_: object) -> bool:
            status = self.status()
            ready = next((c for c in status.get("conditions", []) if c["type"] == "Ready"), {})
            progressing = next((c for c in status.get("conditions", []) if c["type"] == "Progressing"), {})
            return (ready.get("status") == "True" and progressing.get("status") == "False"
                    and status.get("observedGeneration") == self.get()["metadata"]["generation"])

        wait_for(self.summary, settled, timeout, f"KafkaCluster {self.name} Ready and settled", interval=3)
        return time.monotonic() - began

    def pods(self, pool: str = "broker") -> list[dict[str, Any]]:
        items = self.kube.kubectl_json("get", "pods", "-n", self.namespace, "-l",
                                       f"kafka.krafty.io/cluster={self.name},kafka.krafty.io/pool={pool}")["items"]
        return sorted(items, key=lambda p: p["metadata"]["name"])

    def unanswered_connections(self, since: str) -> list[str]:
        """The lines of the cluster's nodes' logs, since an RFC 3339 time, where a node gave up connecting to a peer
        that never answered (an address no pod has any more, such as a restarted peer's old one)."""
        found = []
        for pod in self.pods("controller") + self.pods("broker"):
            name = pod["metadata"]["name"]
            log = self.kube.kubectl("logs", name, "-n", self.namespace, "-c", "kafka", f"--since-time={since}")
            found += [f"{name}: {line}" for line in log.splitlines() if "socket connection setup timeout" in line]
        return found

    def connection(self) -> dict[str, str]:
        """The connection ConfigMap the operator publishes for applications."""
        return dict(self.kube.kubectl_json("get", "configmap", f"{self.name}-kafka-connection", "-n",
                                           self.namespace)["data"])

    def kafka_tool(self, tool: str, *args: str, timeout: float = 120, broker: int = 0) -> str:
        """Runs one of Kafka's own tools inside a broker (broker 0 unless told)."""
        return self.kube.kubectl("exec", "-n", self.namespace, f"{self.name}-broker-{broker}", "-c", "kafka", "--",
                                 tool, "--bootstrap-server", "localhost:9092", *args, timeout=timeout)

    def events(self, reason: str | None = None) -> list[dict[str, Any]]:
        items = self.kube.kubectl_json("get", "events", "-n", self.namespace, "--field-selector",
                                       f"involvedObject.name={self.name},involvedObject.kind=KafkaCluster")["items"]
        return [e for e in items if reason is None or e["reason"] == reason]

    def delete(self, timeout: float = 300) -> None:
        self.kube.kubectl("delete", "kafkacluster", self.name, "-n", self.namespace, "--ignore-not-found",
                          "--wait=true", timeout=timeout)


@dataclass
class ClientPod:
    """A pod with confluent-kafka and the traffic CLI, for traffic from inside the cluster."""

    kube: KubeCluster
    name: str = "kafka-client"
    namespace: str = NAMESPACE
    node: str | None = None  # the Kubernetes node it must run on (None: wherever the scheduler puts it)
    cpu: str = "20m"  # its CPU request: its weight against the brokers when the machine is busy

    def create(self) -> None:
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": self.name, "namespace": self.namespace},
               "spec": {"containers": [{"name": "client", "image": CLIENT_IMAGE, "imagePullPolicy": "IfNotPresent",
                                        "resources": {"requests": {"cpu": self.cpu, "memory": "64Mi"}}}],
                        "terminationGracePeriodSeconds": 1,
                        **({"nodeSelector": {"kubernetes.io/hostname": self.node}} if self.node else {})}}
        self.kube.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
        self.kube.kubectl("wait", "--for=condition=Ready", f"pod/{self.name}", "-n", self.namespace,
                          "--timeout=180s", timeout=200)

    def trust_cluster_ca(self, handle: KafkaClusterHandle) -> str:
        """Copies the CA certificates the cluster's connection ConfigMap names into the pod, as an application
        would mount them; returns the file's path there."""
        named = handle.connection()
        secret = self.kube.kubectl_json("get", "secret", named["ssl.truststore.secret"], "-n", handle.namespace)
        path = f"/tmp/{handle.name}-ca.crt"
        self.kube.kubectl("exec", "-i", "-n", self.namespace, self.name, "--", "sh", "-c", f"cat > {path}",
                          stdin=base64.b64decode(secret["data"][named["ssl.truststore.secret.key"]]).decode())
        return path

    def cli(self, *args: str, timeout: float = 300, stdin: str | None = None) -> dict[str, Any]:
        """One traffic_cli.py command's JSON report (args may start with --ca FILE: over TLS)."""
        interactive = ["-i"] if stdin is not None else []
        out = self.kube.kubectl("exec", *interactive, "-n", self.namespace, self.name, "--", "python3",
                                "/app/traffic_cli.py", *args, timeout=timeout, stdin=stdin)
        return dict(json.loads(out.strip().splitlines()[-1]))

    @contextlib.contextmanager
    def steady_producer(self, bootstrap: str, topic: str, rate: float = 100, ca: str | None = None,
                        keys: int = 10, size: int = 0) -> Iterator[dict[str, Any]]:
        """Produces at a steady rate inside the cluster while the block runs; the dict gets the report.
        `ca`: a CA file in the pod, to produce over TLS; `keys` keys in turn; values of `size` bytes. Each record's
        outcome stays in the pod: read them with outcomes(topic)."""
        stop = f"/tmp/stop-{topic}"
        with self._running(stop, "producer", *_tls(ca), "produce", bootstrap, topic, "--rate", str(rate),
                           "--until-file", stop, "--acked", f"/tmp/acked-{topic}.json", "--keys", str(keys),
                           "--size", str(size), "--outcomes", f"/tmp/outcomes-{topic}.csv") as report:
            yield report

    def outcomes(self, topic: str) -> list[tuple[float, float, bool]]:
        """The last steady producer's records on `topic`: (sent at, epoch seconds; seconds to the outcome;
        acknowledged)."""
        text = self.kube.kubectl("exec", "-n", self.namespace, self.name, "--", "cat", f"/tmp/outcomes-{topic}.csv",
                                 timeout=300)
        rows = (line.split(",") for line in text.splitlines() if line)
        return [(int(sent) / 1000, float(took) / 1000, ok == "1") for sent, took, ok in rows]

    @contextlib.contextmanager
    def watching_isr(self, bootstrap: str, topic: str, min_isr: int) -> Iterator[dict[str, Any]]:
        """Samples the topic's partitions while the block runs: the dict gets {"samples": [[epoch seconds,
        partitions without a leader, partitions under min_isr in-sync replicas], ...]} (only the changes)."""
        stop = f"/tmp/stop-isr-{topic}"
        with self._running(stop, "ISR watcher", "watch-isr", bootstrap, topic, "--min-isr", str(min_isr),
                           "--until-file", stop) as report:
            yield report

    @contextlib.contextmanager
    def following_consumer(self, bootstrap: str, topic: str, group: str,
                           ca: str | None = None) -> Iterator[dict[str, Any]]:
        """Consumes with a group while the block runs, and on until it has caught up; the dict gets the
        number of distinct records it saw."""
        stop = f"/tmp/stop-follow-{topic}"
        with self._running(stop, "consumer", *_tls(ca), "follow", bootstrap, topic, "--group", group,
                           "--until-file", stop) as report:
            yield report

    @contextlib.contextmanager
    def _running(self, stop: str, what: str, *args: str) -> Iterator[dict[str, Any]]:
        """A traffic_cli.py command that runs until the stop file exists; the dict gets its report."""
        self.kube.kubectl("exec", "-n", self.namespace, self.name, "--", "rm", "-f", stop)
        argv = [str(self.kube.tools / "kubectl"), "--kubeconfig", str(self.kube.kubeconfig), "exec", "-n",
                self.namespace, self.name, "--", "python3", "/app/traffic_cli.py", *args]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        report: dict[str, Any] = {}
        try:
            yield report
        finally:
            self.kube.kubectl("exec", "-n", self.namespace, self.name, "--", "touch", stop)
            out, err = proc.communicate(timeout=300)
            if proc.returncode != 0:
                raise AssertionError(f"{what} failed: {err[-2000:]}")
            report.update(json.loads(out.strip().splitlines()[-1]))

    def verify(self, bootstrap: str, topic: str, ca: str | None = None) -> dict[str, Any]:
        return self.cli(*_tls(ca), "verify", bootstrap, topic, "--acked", f"/tmp/acked-{topic}.json", timeout=600)


def _tls(ca: str | None) -> tuple[str, ...]:
    return ("--ca", ca) if ca else ()


# The share of the records a steady producer offered (its rate times the seconds it ran) that must come back
# acknowledged: with none failed every record sent is acknowledged, and the producer catches up when it falls behind
ACKNOWLEDGED_FLOOR = 0.8


def assert_written(report: dict[str, Any]) -> None:
    """A steady producer's report from a test under load: no record failed, and the records acknowledged reach
    ACKNOWLEDGED_FLOOR of those offered (no record lost of nothing written proves nothing)."""
    offered = report["rate"] * report["seconds"]
    if report["failed"] != {}:
        raise AssertionError(f"records failed: {report}")
    if report["acked"] < ACKNOWLEDGED_FLOOR * offered:
        raise AssertionError(f"{report['acked']:,} records acknowledged of {offered:,.0f} offered "
                             f"({report['rate']}/s for {report['seconds']} s): {report}")


def topic_resource(name: str, cluster: str, namespace: str = NAMESPACE, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "kafka.krafty.io/v1alpha1", "kind": "Topic",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterRef": {"name": cluster}, **spec}}


def delete_topics(kube: KubeCluster, *names: str, timeout: float = 120, namespace: str = NAMESPACE) -> None:
    """Topic resources and their Kafka topics, while their cluster still runs (a Topic whose KafkaCluster is gone
    stays, saying ClusterNotFound, in the namespace the next tests share)."""
    kube.kubectl("delete", "topics", "-n", namespace, "--ignore-not-found", "--wait=true", *names, timeout=timeout)


def wait_topic_ready(kube: KubeCluster, name: str, timeout: float = 180, namespace: str = NAMESPACE) -> dict[str, Any]:
    def status() -> dict[str, Any]:
        return dict(kube.kubectl_json("get", "topic", name, "-n", namespace).get("status") or {})

    def ready(s: dict[str, Any]) -> bool:
        return any(c["type"] == "Ready" and c["status"] == "True" for c in s.get("conditions", []))

    return wait_for(status, ready, timeout, f"Topic {name} Ready", interval=2)


def leader_stats(handle: KafkaClusterHandle, topic: str) -> tuple[int, int]:
    """(partitions, partitions led by their preferred replica), from kafka-topics --describe."""
    out = handle.kafka_tool("kafka-topics.sh", "--describe", "--topic", topic)
    total = preferred = 0
    for line in out.splitlines():
        fields = dict(part.split(": ", 1) for part in line.strip().split("\t") if ": " in part)
        if "Partition" in fields and "Leader" in fields:
            total += 1
            preferred += fields["Leader"] == fields["Replicas"].split(",")[0]
    return total, preferred


def submit_spark(kube: KubeCluster, namespace: str, cluster: str, job_name: str, *job_args: str) -> None:
    """spark/submit.sh: spark-submit with a k8s:// master, cluster mode, the krafty Spark image."""
    env = {**os.environ, "KUBECONFIG": str(kube.kubeconfig), "NAMESPACE": namespace, "IMAGE": SPARK_IMAGE.name,
           "KAFKA_CLUSTER": cluster, "JOB_NAME": job_name, "EXECUTORS": "1",
           "PATH": f"{kube.tools}:{os.environ['PATH']}"}
    subprocess.run([str(ROOT / "spark" / "submit.sh"), *job_args], env=env, check=True, timeout=600)


def driver_phase(kube: KubeCluster, namespace: str, job_name: str) -> str:
    """Phase of the job's latest Spark driver pod ("none" before it exists)."""
    pods = kube.kubectl_json("get", "pods", "-n", namespace, "-l", "spark-role=driver")
    items = sorted((p for p in pods["items"] if p["metadata"]["name"].startswith(f"{job_name}-")),
                   key=lambda p: p["metadata"]["creationTimestamp"])
    return str(items[-1]["status"]["phase"]) if items else "none"


def repo_path(*parts: str) -> Path:
    return ROOT.joinpath(*parts)
