"""The main job, end to end: `make demo`.

Brings up a Kubernetes cluster (the local one here, kind where Docker answers, or the current kube
context with KRAFTY_E2E_CLUSTER=existing), installs the operator with Helm, creates a KafkaCluster with
dedicated controllers, authorization on and a SCRAM listener over TLS, its Topics and three KafkaUsers (a
producer, the Spark job, an admin), produces page-view events as the producer (keyed by user: they spread over
every partition), installs the Kubeflow Spark operator (built from source) and runs the Spark job through it as a
stream, as its own user (it may read page-views, write page-view-counts and commit its lag group, nothing else),
prints its lag in records and seconds while it catches up, its results, the operator's metrics and the job's
consumer lag, and says how to tear down.
Every step is idempotent: running it again reuses what exists. Any failure stops it with a message and a non-zero exit.

  python scripts/demo.py          run the demo
  python scripts/demo.py down     remove what the demo created (the Kubernetes cluster stays)
"""

from __future__ import annotations

import base64
import json
import re
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import yaml

from krafty.render.kafka_config import render_properties
from krafty_testkit import k8s_kafka as k
from krafty_testkit import spark_operator
from krafty_testkit.kube import KubeCluster, KubeError, detect
from krafty_testkit.waiting import WaitTimeout, wait_for

NAMESPACE = "kafka-demo"
OPERATOR_NAMESPACE = "krafty-demo"
RELEASE = "krafty-demo"
CLUSTER = "demo"
JOB = "pageviews-demo"  # the Spark job, and the KafkaUser it runs as
PRODUCER = "page-view-producer"
ADMIN = "demo-admin"
PAGES = ["/", "/products", "/cart", "/checkout", "/search", "/help"]
T = TypeVar("T")
STARTED = time.monotonic()
PROGRESS_SECONDS = 15


def step(title: str, action: Callable[[], T]) -> T:
    """Runs one step of the demo, saying what it does, what it still waits for every PROGRESS_SECONDS, and how
    long it took."""
    began = time.monotonic()
    print(f"[{time.monotonic() - STARTED:7.1f}s] {title} ...", flush=True)
    done = threading.Event()

    def tick() -> None:
        while not done.wait(PROGRESS_SECONDS):
            print(f"[{time.monotonic() - STARTED:7.1f}s]   still {title[0].lower()}{title[1:]}: "
                  f"{time.monotonic() - began:.0f}s so far", flush=True)

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        result = action()
    finally:
        done.set()
        ticker.join()
    print(f"[{time.monotonic() - STARTED:7.1f}s]   done in {time.monotonic() - began:.1f}s", flush=True)
    return result


def cluster_spec() -> dict[str, Any]:
    """The dedicated-controllers example, sized for a small machine, with one listener: SCRAM-SHA-512 over TLS,
    and authorization on (what no ACL allows is denied; the admin user may do anything)."""
    spec = yaml.safe_load(k.repo_path("crds", "examples", "kafkacluster-dedicated.yaml").read_text())["spec"]
    for pool in ("brokers", "controllers"):
        spec[pool].update(k.SMALL_NODE)
    spec["brokers"].pop("template", None)
    spec["listeners"] = [{"name": "scram", "port": 9094, "tls": True, "authentication": "scram-sha-512"}]
    spec["authorization"] = {"enabled": True, "superUsers": [ADMIN]}
    return dict(spec)


def kafka_user(name: str, *acls: tuple[str, str, list[str]]) -> dict[str, Any]:
    """A SCRAM KafkaUser allowed `acls`: (resource type, name, operations) each."""
    return {"apiVersion": "kafka.krafty.io/v1alpha1", "kind": "KafkaUser",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"clusterRef": {"name": CLUSTER}, "authentication": {"type": "scram-sha-512"},
                     "authorization": {"acls": [{"resource": {"type": kind, "name": resource}, "operations": ops}
                                                for kind, resource, ops in acls]}}}


def users(kube: KubeCluster) -> None:
    """Each application its own principal, allowed what it does and nothing more."""
    kube.apply([kafka_user(PRODUCER, ("topic", "page-views", ["Write", "Describe"])),
                kafka_user(JOB, ("topic", "page-views", ["Read", "Describe"]),
                           ("topic", "page-view-counts", ["Write", "Describe"]), ("group", f"spark-{JOB}", ["Read"])),
                kafka_user(ADMIN)])
    for name in (PRODUCER, JOB, ADMIN):
        wait_for(lambda n=name: kube.kubectl_json("get", "kafkauser", n, "-n", NAMESPACE).get("status") or {},
                 lambda s: any(c["type"] == "Ready" and c["status"] == "True" for c in s.get("conditions", [])),
                 180, f"KafkaUser {name} Ready")
    print(kube.kubectl("get", "kafkausers", "-n", NAMESPACE))


def secret(kube: KubeCluster, name: str) -> dict[str, str]:
    data = kube.kubectl_json("get", "secret", name, "-n", NAMESPACE)["data"]
    return {key: base64.b64decode(value).decode() for key, value in data.items()}


def events(count: int = 3000) -> list[str]:
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=10)
    return [json.dumps({"event_id": f"e{i}", "user": f"u{i % 97}", "page": PAGES[(i * 7 + i // 5) % len(PAGES)],
                        "ts": (start + timedelta(seconds=i * 0.2)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"})
            for i in range(count)]


def install(kube: KubeCluster) -> None:
    ns = kube.kubectl("create", "namespace", NAMESPACE, "--dry-run=client", "-o", "yaml")
    kube.kubectl("apply", "-f", "-", stdin=ns)
    k.install_operator(kube, RELEASE, OPERATOR_NAMESPACE, (NAMESPACE,))


def kafka(kube: KubeCluster) -> k.KafkaClusterHandle:
    handle = k.KafkaClusterHandle(kube, CLUSTER, NAMESPACE)
    handle.apply(cluster_spec())
    handle.wait_ready(900)
    print(kube.kubectl("get", "kafkaclusters", "-n", NAMESPACE))
    return handle


def topics(kube: KubeCluster) -> None:
    kube.apply([k.topic_resource("page-views", CLUSTER, NAMESPACE, partitions=6, replicas=3,
                                 config={"min.insync.replicas": 2, "retention.ms": 604800000}),
                k.topic_resource("page-view-counts", CLUSTER, NAMESPACE, partitions=3, replicas=3,
                                 config={"min.insync.replicas": 2, "cleanup.policy": "compact"})])
    for name in ("page-views", "page-view-counts"):
        k.wait_topic_ready(kube, name, namespace=NAMESPACE)
    print(kube.kubectl("get", "topics", "-n", NAMESPACE))


def as_user(client: k.ClientPod, handle: k.KafkaClusterHandle, name: str) -> tuple[tuple[str, ...], str]:
    """What the client pod passes to connect as one KafkaUser, from its Secret (SCRAM over TLS, trusting the
    cluster CA), and the address the Secret names."""
    credential = secret(client.kube, name)
    if credential["security.protocol"] != "SASL_SSL":
        raise RuntimeError(f"KafkaUser {name}'s Secret says {credential['security.protocol']}, not SASL_SSL")
    return (("--ca", client.trust_cluster_ca(handle), "--scram", f"{name}:{credential['password']}"),
            credential["bootstrap.servers"])


def produce(client: k.ClientPod, handle: k.KafkaClusterHandle) -> None:
    lines = events()
    options, address = as_user(client, handle, PRODUCER)
    result = client.cli(*options, "produce-lines", address, "page-views", "--key-field", "user",
                        stdin="\n".join(lines))
    if result["acked"] != len(lines):
        raise RuntimeError(f"only {result['acked']} of {len(lines)} events were acknowledged")
    print(f"  {len(lines)} page-view events written with acks=all as User:{PRODUCER} (SCRAM over TLS) to {address},")
    ends = admin_tool(client.kube, handle, "kafka-get-offsets.sh", "--topic", "page-views")
    spread = ", ".join(f"{p}: {n}" for p, n in re.findall(r"^page-views:(\d+):(\d+)$", ends, re.M))
    print(f"  keyed by user, so each user's views stay in order in one partition; records per partition: {spread}")


def handle_id(kube: KubeCluster) -> str:
    """The KafkaCluster's id: a checkpoint belongs to the topics of one cluster, not to its name."""
    return str(k.KafkaClusterHandle(kube, CLUSTER, NAMESPACE).status()["clusterId"])


def spark(kube: KubeCluster) -> None:
    """The page-view job as a stream, run by the Spark operator from spark/k8s/spark-application.yaml, its counts
    written to page-view-counts (update mode: every micro-batch's changed windows)."""
    for manifest in ("rbac.yaml", "pvc.yaml"):
        kube.kubectl("apply", "-n", NAMESPACE, "-f", str(k.repo_path("spark", "k8s", manifest)))
    app = spark_operator.application(JOB, CLUSTER, k.SPARK_IMAGE.name, {
        "--job-name": JOB, "--input-topics": "page-views",
        "--checkpoint": f"/data/{JOB}/{handle_id(kube)}/checkpoint",
        # (300 views a micro-batch: the events already written take ten of them, so the catching up is seen)
        "--max-offsets-per-trigger": "300", "--output-path": None, "--output-topic": "page-view-counts"})
    kube.apply([app], namespace=NAMESPACE)
    spark_operator.wait_running(kube, NAMESPACE, JOB)


def catching_up(kube: KubeCluster) -> None:
    """The job's lag, in records and in seconds, as the operator reads it, until it has read everything."""
    group, began = f"spark-{JOB}", time.monotonic()

    def lag() -> tuple[float | None, float | None]:
        text = k.leader_metrics_text(kube, RELEASE, OPERATOR_NAMESPACE)
        found = {name: float(value) for name, value in re.findall(
            rf'^(krafty_consumergroup_lag_sum|krafty_consumergroup_lag_seconds)\{{[^}}]*group="{group}"[^}}]*'
            rf'topic="page-views"[^}}]*\}} (\S+)$', text, re.M)}
        return found.get("krafty_consumergroup_lag_sum"), found.get("krafty_consumergroup_lag_seconds")

    def show(seen: tuple[float | None, float | None]) -> bool:
        records, seconds = seen
        elapsed = time.monotonic() - began
        if records is None or seconds is None:
            print(f"  {elapsed:5.0f} s  waiting for the job's first commit to {group}")
            return False
        print(f"  {elapsed:5.0f} s  {records:6.0f} records behind, the oldest unread written {seconds:5.0f} s ago")
        return records == 0

    wait_for(lambda: show(lag()), bool, 600, f"the lag of {group} at 0", interval=5)
    print("  (krafty_consumergroup_lag_seconds: the age of the oldest record the group has not read; the events were "
          "written at once, so it grows until the last of them is read)")
    print(f"  The job keeps running as a stream: kubectl get sparkapplication {JOB} -n {NAMESPACE}")


def results(client: k.ClientPod, handle: k.KafkaClusterHandle) -> None:
    options, address = as_user(client, handle, ADMIN)
    values = client.cli(*options, "last-values", address, "page-view-counts")["values"]
    counts = [json.loads(v) for v in values.values()]
    counts.sort(key=lambda c: (c["window_start"], -c["views"]))
    print(f"  {'window start (UTC)':<26} {'page':<12} views")
    for c in counts[:24]:
        print(f"  {c['window_start']:<26} {c['page']:<12} {c['views']}")
    print(f"  ({len(counts)} page/window counts; all of them: spark job output topic page-view-counts)")


def metrics(kube: KubeCluster, handle: k.KafkaClusterHandle) -> None:
    service = f"{RELEASE}-metrics"
    holder = wait_for(lambda: k.operator_leader(kube, RELEASE, OPERATOR_NAMESPACE), bool, 60, "an operator leading")
    leader = k.pod_of(str(holder))
    text = k.leader_metrics_text(kube, RELEASE, OPERATOR_NAMESPACE)
    shown = [line for line in text.splitlines() if line.startswith(("krafty_cluster_", "krafty_consumergroup_lag_sum"))
             and f'cluster="{CLUSTER}"' in line]
    print("\n".join(f"  {line}" for line in shown[:20]))
    lag = admin_tool(kube, handle, "kafka-consumer-groups.sh", "--describe", "--group", f"spark-{JOB}")
    print("  The Spark job's progress as consumer-group lag (kafka-consumer-groups.sh --describe):")
    print("\n".join(f"    {line}" for line in lag.strip().splitlines()))
    print(f"\n  Operator metrics: service {OPERATOR_NAMESPACE}/{service}, port 8080, /metrics, on each replica "
          f"(leading now: {leader}; krafty_operator_leader says which)")
    print(f"  Kafka metrics: port 9404 (named 'metrics') of every pod of {NAMESPACE}/{CLUSTER}")
    print("  Alerts: charts/krafty-operator/files/prometheus-rules.yaml; dashboard: charts/krafty-operator/files/"
          "dashboards/krafty.json")


def admin_tool(kube: KubeCluster, handle: k.KafkaClusterHandle, tool: str, *args: str) -> str:
    """One of Kafka's tools in broker 0, as the admin user (its properties written from its Secret)."""
    credential = secret(kube, ADMIN)
    config = render_properties({"security.protocol": "SASL_SSL", "sasl.mechanism": credential["sasl.mechanism"],
                                "sasl.jaas.config": credential["sasl.jaas.config"], "ssl.truststore.type": "PEM",
                                "ssl.truststore.certificates": credential["ca.crt"]})
    pod = ["-n", NAMESPACE, f"{handle.name}-broker-0", "-c", "kafka"]
    kube.kubectl("exec", "-i", *pod, "--", "sh", "-c", "cat > /tmp/demo-admin.properties", stdin=config)
    return kube.kubectl("exec", *pod, "--", tool, "--bootstrap-server", credential["bootstrap.servers"],
                        "--command-config", "/tmp/demo-admin.properties", *args, timeout=120)


def down(kube: KubeCluster) -> None:
    if kube.kubectl("api-resources", "--api-group", "sparkoperator.k8s.io", "-o", "name").strip():
        kube.kubectl("delete", "sparkapplications", "--all", "-n", NAMESPACE, "--ignore-not-found", "--wait=true",
                     timeout=300)
    spark_operator.uninstall(kube, (NAMESPACE,))
    kube.kubectl("delete", "kafkausers,topics,kafkaclusters", "--all", "-n", NAMESPACE, "--ignore-not-found",
                 "--wait=true", timeout=600)
    kube.run_helm("uninstall", RELEASE, "--namespace", OPERATOR_NAMESPACE, "--ignore-not-found", "--wait")
    kube.kubectl("delete", "namespace", NAMESPACE, OPERATOR_NAMESPACE, "--ignore-not-found", "--wait=true",
                 timeout=600)


def main(argv: list[str]) -> int:
    kube = step("Kubernetes cluster up", _up)
    if argv[1:] == ["down"]:
        step("removing the demo (Spark job and operator, krafty operator, Kafka cluster, topics)", lambda: down(kube))
        return 0
    step("building and loading the operator, Kafka, client, Spark and Spark operator images",
         lambda: kube.load_images([*k.IMAGES, k.SPARK_IMAGE, spark_operator.image()]))
    step(f"installing the operator with Helm (release {RELEASE}, watching {NAMESPACE})", lambda: install(kube))
    handle = step(f"creating KafkaCluster {CLUSTER}: 3 dedicated controllers + 3 brokers", lambda: kafka(kube))
    step("creating Topics page-views and page-view-counts", lambda: topics(kube))
    step(f"creating KafkaUsers {PRODUCER}, {JOB} (the Spark job) and {ADMIN}, each with its ACLs",
         lambda: users(kube))
    client = k.ClientPod(kube, namespace=NAMESPACE)
    step("starting a client pod", client.create)
    step("producing page-view events", lambda: produce(client, handle))
    step(f"installing the Kubeflow Spark operator ({spark_operator.pinned_version()}, built from source) with its "
         "own Helm chart", lambda: spark_operator.install(kube, (NAMESPACE,)))
    step(f"starting the Spark job as a stream (SparkApplication {JOB}, as User:{JOB}, SCRAM over TLS)",
         lambda: spark(kube))
    step("the job catching up: its lag in records and in seconds, as the operator reads it",
         lambda: catching_up(kube))
    step("page views per page and minute, as Spark counted them", lambda: results(client, handle))
    step("metrics", lambda: metrics(kube, handle))
    print("\nTear down: `make demo-down` (the demo), then `e2e/localkube/localkube down` (the local cluster).")
    print(f"Explore: export KUBECONFIG={kube.kubeconfig}; kubectl get kafkaclusters,topics,kafkausers -n {NAMESPACE}")
    return 0


def _up() -> KubeCluster:
    kube = detect()
    kube.up()
    return kube


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except (KubeError, WaitTimeout, RuntimeError, OSError) as error:
        print(f"\n[{time.monotonic() - STARTED:7.1f}s] FAILED: {error}", file=sys.stderr)
        sys.exit(1)
