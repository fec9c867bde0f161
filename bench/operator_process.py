"""The operator as a process beside a real kube-apiserver, measured from outside (its /proc and its own metrics),
and the Topic resources and direct create_topics batches the scale benchmarks compare."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
from confluent_kafka.admin import NewTopic

from krafty.clients.kafka_admin import KafkaAdmin
from krafty.decide.topics import by_request
from krafty.naming import GROUP, VERSION
from krafty_testkit import procfs
from krafty_testkit.apiserver import LocalApiServer, free_port
from krafty_testkit.bench_size import sized
from krafty_testkit.waiting import wait_for

PARTITIONS = 4
REPLICAS = 1  # the operator's work grows with topics and partitions; replicas only load the brokers of one machine
RECORDS_EACH = 1 + PARTITIONS + 1  # Kafka's metadata records to create one (the topic, its partitions, retention.ms)
APPLY_CHUNK = 500  # Topic resources per kubectl apply
CALM_SECONDS = sized(95, 35)  # three topic passes (one every 30 s when nothing changes; the smoke run one)
NAMESPACE_UNWATCHED = "bench-unwatched"  # Topics no operator looks at: the watch-and-create baseline
CRDS = Path(__file__).resolve().parents[1] / "crds"


class Operator:
    """The operator as a process: its metrics endpoint and its own CPU time and RSS from /proc."""

    def __init__(self, proc: subprocess.Popen[bytes], metrics_port: int) -> None:
        self.proc = proc
        self.metrics_port = metrics_port

    def cpu_seconds(self) -> float:
        return procfs.cpu_seconds(Path(f"/proc/{self.proc.pid}/stat").read_text())

    def rss_mib(self) -> float:
        return procfs.rss_mib(Path(f"/proc/{self.proc.pid}/status").read_text())

    def _metrics(self) -> str:
        return urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10).read().decode()

    def passes(self, kind: str = "topics") -> tuple[float, float]:
        """(seconds in passes of this kind, passes) since the start, from the operator's own histogram."""
        found = dict(re.findall(rf'^krafty_reconcile_duration_seconds_(sum|count)\{{kind="{kind}"\}} (\S+)$',
                                self._metrics(), re.M))
        return float(found.get("sum", 0)), float(found.get("count", 0))

    def writes(self) -> float:
        """API writes (not reads) to Topics and Events since the start, from the operator's own counter."""
        return sum(float(n) for verb, n in re.findall(
            r'^krafty_kube_requests_total\{kind="(?:Topic|Event)",verb="([^"]+)"\} (\S+)$', self._metrics(), re.M)
            if verb not in ("get", "list"))


@contextlib.contextmanager
def running_operator(apiserver: LocalApiServer, namespace: str, kafka: str | dict[str, str],
                     log: Path) -> Iterator[Operator]:
    """The CRDs installed, the namespace made, and the operator watching it; it reaches Kafka through
    KRAFTY_KAFKA_BOOTSTRAP (one address, or each cluster's) because pod DNS names do not resolve here."""
    apiserver.kubectl("apply", "--server-side", "-f", str(CRDS))
    apiserver.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    for made in (namespace, NAMESPACE_UNWATCHED):  # (the API server is the session's: another bench may have made it)
        apiserver.kubectl("create", "namespace", made, check=False)
    port = free_port()
    env = {**os.environ, "KUBECONFIG": str(apiserver.kubeconfig),
           "KRAFTY_KAFKA_BOOTSTRAP": kafka if isinstance(kafka, str) else json.dumps(kafka)}
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "krafty.runtime.main", "--namespace", namespace,
                                 "--metrics-port", str(port), "--health-port", "0"], env=env, stdout=out,
                                stderr=subprocess.STDOUT)
    running = Operator(proc, port)
    try:
        wait_for(running.writes, lambda _: True, 60, "the operator's metrics endpoint", interval=1)
        yield running
    finally:
        proc.terminate()
        proc.wait(30)


def calm(operator: Operator, kind: str = "topics") -> tuple[float, float, float]:
    """(mean seconds of a pass of this kind, idle millicores, RSS MiB) over CALM_SECONDS with nothing changing."""
    spent, passes = operator.passes(kind)
    cpu, began = operator.cpu_seconds(), time.monotonic()
    time.sleep(CALM_SECONDS)
    spent_after, passes_after = operator.passes(kind)
    millicores = 1000 * (operator.cpu_seconds() - cpu) / (time.monotonic() - began)
    assert passes_after > passes, f"no {kind} pass ran while calm"
    return (spent_after - spent) / (passes_after - passes), millicores, operator.rss_mib()


def retention(i: int) -> str:
    return str(3_600_000 + i)


def topics(prefix: str, first: int, last: int) -> dict[str, str]:
    """Topic names with this prefix, numbered first..last-1, each with its own retention.ms."""
    return {f"{prefix}-{i:05d}": retention(i) for i in range(first, last)}


def apply_topics(apiserver: LocalApiServer, namespace: str, cluster: str, names: dict[str, str]) -> None:
    """Topic resources for these topics (name -> retention.ms) in this cluster, applied in chunks at once."""
    docs = [{"apiVersion": "kafka.krafty.io/v1alpha1", "kind": "Topic",
             "metadata": {"name": name, "namespace": namespace},
             "spec": {"clusterRef": {"name": cluster}, "partitions": PARTITIONS, "replicas": REPLICAS,
                      "config": {"retention.ms": int(value)}}} for name, value in names.items()]
    for start in range(0, len(docs), APPLY_CHUNK):
        apiserver.kubectl("apply", "--server-side", "-f", "-",
                          input="\n---\n".join(json.dumps(d) for d in docs[start:start + APPLY_CHUNK]))


def configured(admin: KafkaAdmin, names: dict[str, str]) -> int:
    """How many of the topics (name -> its retention.ms) exist with that override."""
    existing = set(admin.client.list_topics(timeout=60).topics)
    present = [n for n in names if n in existing]
    overrides = admin.topic_overrides(present) if present else {}
    return sum(1 for n in present if overrides.get(n, {}).get("retention.ms") == names[n])


def _create(admin: KafkaAdmin, names: dict[str, str]) -> None:
    """These topics (name -> retention.ms) created in as few create_topics requests as Kafka accepts."""
    futures = [future for request in by_request(dict.fromkeys(names, RECORDS_EACH))
               for future in admin.client.create_topics(
                   [NewTopic(n, PARTITIONS, REPLICAS, config={"retention.ms": names[n]}) for n in request],
                   operation_timeout=300, request_timeout=300).values()]
    for future in futures:
        future.result(timeout=600)


def _delete(admin: KafkaAdmin, names: dict[str, str]) -> None:
    for request in by_request(dict.fromkeys(names, RECORDS_EACH)):  # (deletions have a limit too)
        for future in admin.client.delete_topics(request, operation_timeout=300, request_timeout=300).values():
            future.result(timeout=600)
    wait_for(lambda: set(names) & set(admin.client.list_topics(timeout=60).topics), lambda left: not left, 600,
             "the topics gone")


def direct_batch(admin: KafkaAdmin, names: dict[str, str], interval: float = 1) -> float:
    """Seconds for one create_topics batch of these topics until all are configured, looking every `interval`
    seconds; they are deleted after."""
    began = time.monotonic()
    _create(admin, names)
    wait_for(lambda: configured(admin, names), lambda n: n == len(names), 900, "all direct topics configured",
             interval=interval)
    seconds = time.monotonic() - began
    _delete(admin, names)
    return seconds


def watched_and_created(apiserver: LocalApiServer, admin: KafkaAdmin, names: dict[str, str]) -> float:
    """The least any operator of Topic resources does, on the same API server and Kafka: the Topics applied as
    the operator's are, into a namespace no operator watches (NAMESPACE_UNWATCHED), and a watch that creates the
    topics of the Topics arrived so far, at once, while the apply goes on; nothing validated first and nothing
    written back (no finalizer, status or Event). Seconds from the apply's start until every topic is configured;
    then the topics and the Topics are deleted."""
    api = kubernetes.client.CustomObjectsApi(kubernetes.config.new_client_from_config(str(apiserver.kubeconfig)))
    topics_there = (GROUP, VERSION, NAMESPACE_UNWATCHED, "topics")
    version = api.list_namespaced_custom_object(*topics_there)["metadata"]["resourceVersion"]
    arrived: queue.Queue[dict[str, Any]] = queue.Queue()
    done = threading.Event()

    def watch() -> None:
        nonlocal version
        while not done.is_set():
            for event in kubernetes.watch.Watch().stream(api.list_namespaced_custom_object, *topics_there,
                                                         resource_version=version, timeout_seconds=2):
                version = event["object"]["metadata"]["resourceVersion"]
                if event["type"] == "ADDED":
                    arrived.put(event["object"])

    began = time.monotonic()
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    applying = threading.Thread(target=apply_topics, args=(apiserver, NAMESPACE_UNWATCHED, "none", names))
    applying.start()
    created = 0
    while created < len(names):
        batch = [arrived.get(timeout=600)]
        while not arrived.empty():
            batch.append(arrived.get())
        _create(admin, {t["metadata"]["name"]: str(t["spec"]["config"]["retention.ms"]) for t in batch})
        created += len(batch)
    wait_for(lambda: configured(admin, names), lambda n: n == len(names), 900, "all watched topics configured",
             interval=2)  # (as the operator's step looks)
    seconds = time.monotonic() - began
    done.set()
    applying.join()
    watcher.join()
    _delete(admin, names)
    api.delete_collection_namespaced_custom_object(*topics_there)
    wait_for(lambda: api.list_namespaced_custom_object(*topics_there)["items"], lambda left: not left, 600,
             "the watched Topics gone")
    return seconds


def ready_resources(apiserver: LocalApiServer, namespace: str) -> int:
    out = apiserver.kubectl("get", "topics", "-n", namespace, "-o",
                            'jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\\n"}{end}')
    return out.stdout.split().count("True")
