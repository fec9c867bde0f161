"""What the roll benchmarks share: a roll run under a steady acks=all load with the pods and the topic's ISR
watched, and the figures made of it (latency percentiles of records sent in a span, seconds under min ISR)."""

from __future__ import annotations

import calendar
import contextlib
import itertools
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from krafty_testkit.k8s_kafka import (
    NAMESPACE,
    ClientPod,
    KafkaClusterHandle,
    delete_topics,
    topic_resource,
    wait_topic_ready,
)
from krafty_testkit.kube import KubeCluster
from krafty_testkit.waiting import wait_for


@dataclass(frozen=True)
class Load:
    """The producer every run writes with, and how long it runs before and after the roll."""

    topic: str
    min_isr: int
    rate: int  # records/s
    size: int  # bytes a record
    keys: int
    before_s: float
    after_s: float


@dataclass
class Run:
    name: str
    began: float = 0.0  # the roll's start and end (epoch seconds)
    ended: float = 0.0
    outcomes: list[tuple[float, float, bool]] = field(default_factory=list)
    isr: list[list[float]] = field(default_factory=list)  # [epoch, partitions offline, partitions under min ISR]
    isr_until: float = 0.0
    pods: list[tuple[float, str, str]] = field(default_factory=list)  # (epoch, pod, "stopping" | "ready")
    verified: dict[str, Any] = field(default_factory=dict)
    said: list[str] = field(default_factory=list)  # what status.roll said while the roll waited

    @property
    def restarting(self) -> tuple[float, float]:
        """From the first pod told to stop to the last new pod Ready: the same span for either roll (the
        operator's also holds its preflight pods before, and its leader elections after)."""
        stops = [at for at, _, what in self.pods if what == "stopping"]
        readies = [at for at, _, what in self.pods if what == "ready"]
        return min(stops), max(readies)

    @property
    def failed(self) -> int:
        return sum(1 for _, _, ok in self.outcomes if not ok)


def stamp(text: str) -> float:
    return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")))


def stop_requested(pod: dict[str, Any]) -> float | None:
    """When the pod was told to stop (its deletionTimestamp is that moment plus its grace period), if it was."""
    meta = pod["metadata"]
    if "deletionTimestamp" not in meta:
        return None
    return stamp(meta["deletionTimestamp"]) - int(meta.get("deletionGracePeriodSeconds") or 0)


def became_ready(pod: dict[str, Any]) -> float | None:
    ready = [c for c in pod.get("status", {}).get("conditions", []) if c["type"] == "Ready" and c["status"] == "True"]
    return stamp(ready[0]["lastTransitionTime"]) if ready else None


class PodWatch(threading.Thread):
    """Each second: which of the cluster's pods was told to stop, and which new pod became Ready, each at the
    moment the API server recorded (to the second; a busy machine can make a kubectl call take seconds)."""

    def __init__(self, kube: KubeCluster, cluster: str) -> None:
        super().__init__(daemon=True)
        self.kube, self.cluster, self.stop_event = kube, cluster, threading.Event()
        self.seen: list[tuple[float, str, str]] = []

    def run(self) -> None:
        first: set[str] | None = None  # the uids of the pods there when it began
        current: dict[str, str] = {}  # pod name -> the uid last seen
        stopped, readied = set(), set()
        while not self.stop_event.is_set():
            items = self.kube.kubectl_json("get", "pods", "-n", NAMESPACE, "-l",
                                          f"kafka.krafty.io/cluster={self.cluster},kafka.krafty.io/pool")["items"]
            now = time.time()
            for pod in items:
                name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
                replaced = current.get(name, uid)
                told = stop_requested(pod)
                if replaced != uid and replaced not in stopped:  # gone between two looks: seen now
                    stopped.add(replaced)
                    self.seen.append((now, name, "stopping"))
                if told is not None and uid not in stopped:
                    stopped.add(uid)
                    self.seen.append((told, name, "stopping"))
                current[name] = uid
                ready = became_ready(pod)
                if first is not None and uid not in first and ready is not None and uid not in readied:
                    readied.add(uid)
                    self.seen.append((ready, name, "ready"))
            first = set(current.values()) if first is None else first
            time.sleep(1)

    def done(self) -> list[tuple[float, str, str]]:
        self.stop_event.set()
        self.join(30)
        return self.seen


@contextlib.contextmanager
def loaded_cluster(kube: KubeCluster, name: str, spec: dict[str, Any], load: Load, partitions: int
                   ) -> Iterator[KafkaClusterHandle]:
    """A cluster and the load's topic (RF 3), deleted after."""
    handle = KafkaClusterHandle(kube, name)
    handle.apply(spec)
    handle.wait_ready(900)
    kube.apply([topic_resource(load.topic, name, partitions=partitions, replicas=3,
                               config={"min.insync.replicas": load.min_isr})])
    wait_topic_ready(kube, load.topic)
    yield handle
    delete_topics(kube, load.topic)
    handle.delete(600)


@contextlib.contextmanager
def load_client(kube: KubeCluster, name: str) -> Iterator[ClientPod]:
    """A client pod of its own, weighted like a broker (500m): 2,000 records/s keep a Python producer busy."""
    pod = ClientPod(kube, name=name, cpu="500m")
    pod.create()
    yield pod
    kube.kubectl("delete", "pod", pod.name, "-n", NAMESPACE, "--wait=false")


def warm_up(handle: KafkaClusterHandle, client: ClientPod, load: Load, seconds: float) -> None:
    """The load for a while, not counted: a fresh JVM's first minute is slower."""
    with client.steady_producer(handle.bootstrap, load.topic, rate=load.rate, keys=load.keys, size=load.size):
        time.sleep(seconds)


def under_load(handle: KafkaClusterHandle, client: ClientPod, load: Load, name: str,
               roll: Callable[[Run], None]) -> Run:
    """`roll` under the producer and the watchers; fills in what each saw."""
    run = Run(name)
    watch = PodWatch(handle.kube, handle.name)
    with client.watching_isr(handle.bootstrap, load.topic, load.min_isr) as isr, \
            client.steady_producer(handle.bootstrap, load.topic, rate=load.rate, keys=load.keys, size=load.size):
        time.sleep(load.before_s)
        watch.start()
        run.began = time.time()
        roll(run)
        run.ended = time.time()
        time.sleep(load.after_s)
        run.isr_until = time.time()
    run.pods, run.isr = watch.done(), isr["samples"]
    run.outcomes = client.outcomes(load.topic)
    run.verified = client.verify(handle.bootstrap, load.topic)
    return run


def uids(handle: KafkaClusterHandle) -> dict[str, str]:
    """Each of the cluster's pods' uid, by pod name."""
    return {p["metadata"]["name"]: p["metadata"]["uid"] for pool in ("controller", "broker") for p in handle.pods(pool)}


def by_operator(handle: KafkaClusterHandle, pods: list[str], change: dict[str, Any]) -> Callable[[Run], None]:
    """The operator's roll of `pods` for a spec change; what status.roll said while it waited goes to run.said."""
    def roll(run: Run) -> None:
        before = {pod: old for pod, old in uids(handle).items() if pod in pods}
        handle.patch_spec(change)

        def finished(status: dict[str, Any]) -> bool:
            said = (status.get("roll") or {})
            for message in (said.get("blockedBy"), said.get("alone")):
                if message and message not in run.said:
                    run.said.append(message)
            if status.get("roll") is not None:
                return False
            now = uids(handle)
            return all(now.get(pod) not in (None, old) for pod, old in before.items())

        wait_for(handle.status, finished, 1800, f"{pods} restarted by the operator", interval=2)
        handle.wait_ready(900)
    return roll


@contextlib.contextmanager
def paused(handle: KafkaClusterHandle) -> Iterator[None]:
    handle.kube.kubectl("annotate", "kafkacluster", handle.name, "-n", NAMESPACE, "kafka.krafty.io/paused=true",
                        "--overwrite")
    try:
        yield
    finally:
        handle.kube.kubectl("annotate", "kafkacluster", handle.name, "-n", NAMESPACE, "kafka.krafty.io/paused-")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1))] if ordered else float("nan")


def latencies(run: Run, start: float, end: float) -> list[float]:
    return [took for sent, took, _ in run.outcomes if start <= sent < end]


def spans(run: Run) -> Iterator[tuple[float, float, list[float]]]:
    """The watcher's samples as (from, until, [partitions offline, partitions under min ISR]): each holds until
    the next, the last until the watcher stopped."""
    for (at, *state), (following, *_) in itertools.pairwise([*run.isr, [run.isr_until, 0, 0]]):
        yield at, following, state


def seconds_with(run: Run, column: int, since: float | None = None) -> float:
    """Seconds from `since` (the start of the roll) to the end of the run with any partition offline (column 1)
    or under min ISR (column 2)."""
    start = run.began if since is None else since
    return sum(until - max(at, start) for at, until, state in spans(run)
               if state[column - 1] and until > max(at, start))


def pyplot() -> Any:
    """matplotlib's pyplot, drawing to files."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_run(ax: Any, run: Run, title: str, cluster: str, marked: tuple[float, float] | None = None,
             origin: str = "the roll") -> None:
    """A run's latency over time (per second: the median and the slowest record acknowledged), failures as
    crosses, each restart as a dashed line, time under min ISR shaded red (and `marked`, a span, grey)."""
    buckets: dict[int, list[float]] = {}
    for sent, took, ok in run.outcomes:
        if ok:
            buckets.setdefault(int(sent - run.began), []).append(took * 1000)
    xs = sorted(buckets)
    ax.plot(xs, [percentile(buckets[x], 0.5) for x in xs], lw=0.8, label="median per second")
    ax.plot(xs, [max(buckets[x]) for x in xs], lw=0.8, label="slowest per second")
    failures = [(sent - run.began, took * 1000) for sent, took, ok in run.outcomes if not ok]
    if failures:
        ax.scatter(*zip(*failures, strict=True), marker="x", color="red", s=12, label="failed")
    if marked is not None:
        ax.axvspan(marked[0] - run.began, marked[1] - run.began, color="grey", alpha=0.15, lw=0)
    for at, until, state in spans(run):
        if state[1]:
            ax.axvspan(at - run.began, until - run.began, color="red", alpha=0.15, lw=0)
    for at, pod, what in run.pods:
        if what == "stopping":
            ax.axvline(at - run.began, color="grey", ls="--", lw=0.8)
            ax.text(at - run.began, 1.02, pod.removeprefix(f"{cluster}-"), rotation=90, fontsize=7,
                    transform=ax.get_xaxis_transform(), va="bottom")
    ax.axvline(run.ended - run.began, color="black", lw=0.8)
    ax.set_yscale("log")
    ax.set_title(title, fontsize=10, pad=48)
    ax.set_xlabel(f"seconds from the start of {origin} (black line: the roll's end; red: under min ISR)")
    ax.set_ylabel("acks=all latency (ms)")
    ax.legend(fontsize=7, loc="upper left")
