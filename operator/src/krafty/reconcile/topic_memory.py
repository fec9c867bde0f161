"""What the topic pass remembers of each cluster's Topics between passes, so that a calm pass asks Kafka about as
few topics, parses as few specs and makes as few reports as it can (as krafty.reconcile.applied is for the
cluster pass).

Per cluster: when a pass last looked at every Topic and which of them were Ready then (see
krafty.reconcile.topics for which Topics a pass looks at in between), each Topic as parsed at its
resourceVersion, and each Topic whose last report wrote nothing, with what that report was made of.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from krafty import naming
from krafty.decide import topics
from krafty.decide.health import summarize
from krafty.model import KafkaClusterSpec

Key = tuple[str, str]  # a cluster, or a Topic: (namespace, name)
Parsed = list[tuple[dict[str, Any], topics.TopicResource | None]]  # each body with its resource (None: unparseable)


@dataclass
class Looked:
    """What the passes of one cluster's Topics saw: when they last looked at all of them, with which cluster spec,
    each Topic Ready then (by its marker), the Kafka topics known to exist, and each one's partitions and
    under-replicated partitions (the metrics)."""
    at: float
    cluster: tuple[KafkaClusterSpec, bool]  # the spec and whether paused
    ready: dict[Key, tuple[str, int, bool]]
    existing: set[str]
    counts: dict[str, tuple[int, int]]


def _marker(body: dict[str, Any]) -> tuple[str, int, bool]:
    """What changes when a user changes a Topic (not the operator's status writes): made again (another uid), its
    spec (generation), or the adoption annotation."""
    meta = body["metadata"]
    return (str(meta.get("uid")), int(meta.get("generation") or 0),
            (meta.get("annotations") or {}).get(naming.ADOPT_ANNOTATION) == "force")


@dataclass(frozen=True)
class Quiet:
    """What a Topic's report is made of, but for a move's progress: the resource (its resourceVersion), Kafka's
    topic, the verdict and the sizes it was created with."""
    version: str | None
    kafka_topic: topics.KafkaTopic | None
    verdict: topics.Verdict
    created_with: tuple[int, int] | None


class TopicMemory:
    def __init__(self, look_at_all_every: float) -> None:
        """`look_at_all_every`: seconds between passes that look at every Topic (0: every pass does)."""
        self._look_at_all_every = look_at_all_every
        self._looked: dict[Key, Looked] = {}
        self._parsed: dict[Key, dict[Key, tuple[str | None, topics.TopicResource | None]]] = {}
        self._quiet: dict[Key, dict[Key, Quiet]] = {}

    def forget(self, cluster: Key) -> None:
        """The cluster has no Topics any more."""
        self._parsed.pop(cluster, None)
        self._looked.pop(cluster, None)
        self._quiet.pop(cluster, None)

    def parse(self, cluster: Key, bodies: list[dict[str, Any]],
              parse: Callable[[dict[str, Any]], topics.TopicResource | None]) -> Parsed:
        """Each body with its resource, parsed again only once changed (another resourceVersion); what is
        remembered of Topics gone since is forgotten."""
        before = self._parsed.get(cluster, {})
        now = {}
        out = []
        for body in bodies:
            meta = body["metadata"]
            key, version = (meta["namespace"], meta["name"]), meta.get("resourceVersion")
            known = before.get(key)
            if known is None or version is None or known[0] != version:
                known = (version, parse(body))
            now[key] = known
            out.append((body, known[1]))
        self._parsed[cluster] = now
        quiet = self._quiet.get(cluster, {})
        self._quiet[cluster] = {topic: made_of for topic, made_of in quiet.items() if topic in now}
        return out

    def focus(self, cluster: Key, state: tuple[KafkaClusterSpec, bool], parsed: Parsed, now: float
              ) -> list[topics.TopicResource] | None:
        """The Topics this pass looks at, or None for all of them (see krafty.reconcile.topics)."""
        looked = self._looked.get(cluster)
        if looked is None or now - looked.at >= self._look_at_all_every or looked.cluster != state:
            return None
        claims = Counter(r.kafka_name for _, r in parsed if r is not None)
        changed = [r for body, r in parsed if r is not None and looked.ready.get(r.key) != _marker(body)]
        if any(r.kafka_name in looked.existing or claims[r.kafka_name] > 1 for r in changed):
            return None
        return changed

    def remember(self, cluster: Key, whole: bool, began: float, state: tuple[KafkaClusterSpec, bool],
                 parsed: Parsed, plan: topics.TopicPlan, after: dict[str, topics.KafkaTopic]) -> Looked:
        """What a pass that began at `began` saw (`whole`: it looked at every Topic)."""
        counts = {name: (len(t.partitions), summarize(t.partitions).under_replicated) for name, t in after.items()}
        looked = self._looked.get(cluster)
        if whole or looked is None:
            looked = self._looked[cluster] = Looked(began, state, {}, set(), {})
        looked.existing.update(after)
        looked.existing.update(t.name for t in plan.creates)  # (one the brokers do not describe yet too)
        looked.counts.update(counts)
        for body, resource in parsed:
            topic = (body["metadata"]["namespace"], body["metadata"]["name"])
            verdict = plan.verdicts.get(topic) if resource is not None else None
            if verdict is not None and verdict.ready:
                looked.ready[topic] = _marker(body)
            elif verdict is not None or whole:
                looked.ready.pop(topic, None)
        return looked

    def next(self, cluster: Key, began: float, delay: float) -> float:
        """`delay`, or less when a pass that looks at every Topic is due before."""
        looked = self._looked.get(cluster)
        if looked is None or self._look_at_all_every <= 0:
            return delay
        return max(min(delay, looked.at + self._look_at_all_every - began), 0.5)

    def quiet(self, cluster: Key) -> dict[Key, Quiet]:
        """The cluster's Topics whose last report wrote nothing, with what it was made of: the same again writes
        nothing, so a calm pass does not make it again (the report keeps it up to date)."""
        return self._quiet.setdefault(cluster, {})
