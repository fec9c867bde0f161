"""kubectl krafty: a KafkaCluster as the operator sees it, and what a change to it would do.

    kubectl krafty status CLUSTER [-n NS] [-o text|json]
    kubectl krafty plan CLUSTER -f new.yaml [-n NS] [-o text|json]
    kubectl krafty restart POD [-n NS] [--force]
    kubectl krafty pause CLUSTER [-n NS]
    kubectl krafty resume CLUSTER [-n NS]

An executable named kubectl-krafty on PATH (installed with the operator's Python package), which kubectl
runs as a plugin. It uses the current kubeconfig context, with the user's own rights. `plan` creates a
KafkaClusterPlan beside the cluster (the API server lets only whoever may update the cluster do so), waits for
the operator to write the plan into its status, prints it and deletes it: the plan is the operator's own
(krafty.planning.preview over its live observation, the children applied as a dry run), never a second
implementation. The consumer lag of `status` is read from the leading operator replica's metrics through
`kubectl port-forward` (krafty.cli.forward): only whoever may port-forward to the operator's pods may ask.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import pathlib
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import kubernetes
import yaml
from kubernetes.client.exceptions import ApiException
from prometheus_client.parser import text_string_to_metric_families

from krafty import naming
from krafty.cli import forward, view
from krafty.clients.kube import Kube, api_message
from krafty.facts.pods import FORCED_RESTART, RESTART_ANNOTATION
from krafty.planning import preview

OPERATOR_SELECTOR = "app.kubernetes.io/name=krafty-operator"  # the chart's operator pods
OPERATOR_NAMESPACE = "krafty-system"  # where the README installs the chart
PLAN_TIMEOUT = 120.0  # the operator observes the cluster (Kafka included) to answer
PLAN_POLL = 0.5
METRICS_TIMEOUT = 30.0
Ask = Callable[..., tuple[int, str]]  # (port name, path, method, body, timeout) -> (status, body text)


class PluginError(RuntimeError):
    """Something the user can act on, printed without a traceback."""


def _default_namespace() -> str:
    try:
        _, context = kubernetes.config.list_kube_config_contexts()
    except (kubernetes.config.ConfigException, OSError):
        return "default"
    return str((context or {}).get("context", {}).get("namespace") or "default")


class Plugin:
    def __init__(self, kube: Kube, operator_selector: str = OPERATOR_SELECTOR,
                 operator_namespace: str = OPERATOR_NAMESPACE) -> None:
        self.kube = kube
        self.operator_namespace = operator_namespace  # (only there: a pod elsewhere may carry the same labels)
        self.selector = dict(part.split("=", 1) for part in operator_selector.split(",") if "=" in part)

    def cluster(self, namespace: str, name: str) -> dict[str, Any]:
        body = self.kube.get(naming.CLUSTER_KIND, name, namespace)
        if body is None:
            raise PluginError(f"no {naming.CLUSTER_KIND} {name} in namespace {namespace}")
        return body

    @contextlib.contextmanager
    def _reaching(self, pod: dict[str, Any], names: Sequence[str]) -> Iterator[Ask]:
        """Requests to ports (by name) of an operator pod, forwarded to it while the block runs."""
        meta = pod["metadata"]
        ports = {p.get("name"): p["containerPort"] for c in pod["spec"]["containers"] for p in c.get("ports") or []}
        if missing := [name for name in names if name not in ports]:
            raise PluginError(f"operator pod {meta['namespace']}/{meta['name']} has no port named "
                              f"{', '.join(missing)}: upgrade the operator's chart")
        try:
            with forward.forwarded(meta["namespace"], meta["name"], [ports[name] for name in names]) as local:
                yield lambda name, path, method="GET", body=None, timeout=METRICS_TIMEOUT: forward.request(
                    local[ports[name]], path, method, body, timeout)
        except forward.ForwardError as error:
            raise PluginError(str(error)) from error

    def _leaders_metrics(self, namespace: str, cluster: str) -> str:
        """The metrics of the leading operator replica that operates the cluster (forwarded to it and read),
        whichever install that is."""
        running = [p for p in self.kube.list("Pod", self.operator_namespace, self.selector)
                   if (p.get("status") or {}).get("phase") == "Running"]
        if not running:
            raise PluginError(f"no running operator pod ({','.join(f'{k}={v}' for k, v in self.selector.items())}"
                              f") in namespace {self.operator_namespace}: is the operator installed there "
                              "(--operator-namespace)?")
        for pod in running:
            with self._reaching(pod, ["metrics"]) as ask:
                code, text = ask("metrics", "/metrics")
                if code == 200 and leads(text, namespace, cluster):
                    return text
        raise PluginError(f"no leading operator replica reports {namespace}/{cluster} (is its namespace watched, "
                          "or has it just started?)")

    def status(self, namespace: str, name: str, as_json: bool) -> str:
        body = self.cluster(namespace, name)
        try:
            lag = group_lag(self._leaders_metrics(namespace, name), namespace, name)
        except PluginError as error:
            lag, note = [], f"\n(consumer lag unknown: {error})"
        else:
            note = ""
        if as_json:
            return json.dumps({"status": body.get("status") or {}, "lag": [vars(g) for g in lag]}, indent=2)
        return view.status_screen(body, lag) + note

    def plan(self, namespace: str, name: str, document: dict[str, Any], as_json: bool) -> str:
        self.cluster(namespace, name)
        made = self.kube.create({"apiVersion": naming.API_VERSION, "kind": naming.PLAN_KIND,
                                 "metadata": {"generateName": f"{name}-plan-", "namespace": namespace},
                                 "spec": {"clusterRef": {"name": name}, "spec": spec_of(document)}})
        try:
            answer = self._planned(namespace, made["metadata"]["name"])
        finally:
            self.kube.delete(naming.PLAN_KIND, made["metadata"]["name"], namespace)
        return json.dumps(answer, indent=2) if as_json else view.plan_screen(f"{namespace}/{name}", answer)

    def _planned(self, namespace: str, name: str, timeout: float = PLAN_TIMEOUT) -> dict[str, Any]:
        """The plan the operator wrote into the KafkaClusterPlan's status, once it has."""
        deadline, last = time.monotonic() + timeout, "the operator has not taken it up"
        while time.monotonic() < deadline:
            body = self.kube.get(naming.PLAN_KIND, name, namespace) or {}
            status = body.get("status") or {}
            ready: dict[str, Any] = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
            if status.get("observedGeneration") == body.get("metadata", {}).get("generation"):
                if ready.get("status") == "True":
                    # (a field the plan leaves empty, null, is not stored: it comes back as the empty plan's)
                    return {**preview.Preview(preview.Verdict.NOTHING).as_json(), **status["plan"]}
                if ready.get("reason") == "ClusterNotFound":
                    raise PluginError(ready.get("message", "no such cluster"))
                last = ready.get("message", last)
            time.sleep(PLAN_POLL)
        raise PluginError(f"no plan after {timeout:.0f} s ({last}): is an operator watching namespace {namespace}?")

    def restart(self, namespace: str, pod: str, force: bool = False) -> str:
        found = self.kube.get("Pod", pod, namespace)
        if found is None or naming.ROLE_LABEL not in (found["metadata"].get("labels") or {}):
            raise PluginError(f"{namespace}/{pod} is not a Kafka node of a krafty cluster")
        moment = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        value = FORCED_RESTART if force else moment
        self.kube.merge_patch("Pod", pod, namespace, {"metadata": {"annotations": {RESTART_ANNOTATION: value}}})
        if force:
            return (f"{pod} annotated for a forced restart: the operator restarts it once every other node's pod is "
                    "ready, without asking Kafka whether a partition or the quorum can spare it (for a cluster that "
                    "refuses the operator)")
        return (f"{pod} annotated for a restart: the operator restarts it when the roll allows (every other node "
                "back and in sync, no partition taken offline or below min.insync.replicas)")

    def pause(self, namespace: str, name: str, paused: bool) -> str:
        self.cluster(namespace, name)
        self.kube.merge_patch(naming.CLUSTER_KIND, name, namespace,
                              {"metadata": {"annotations": {naming.PAUSED_ANNOTATION: "true" if paused else None}}})
        return (f"{namespace}/{name} paused: the operator changes nothing until it is resumed" if paused else
                f"{namespace}/{name} resumed")


def leads(metrics: str, namespace: str, cluster: str) -> bool:
    """Whether these are the metrics of the leading replica, and it operates the cluster."""
    samples = [s for family in text_string_to_metric_families(metrics) for s in family.samples]
    return (any(s.name == "krafty_operator_leader" and s.value == 1 for s in samples)
            and any(s.labels.get("namespace") == namespace and s.labels.get("cluster") == cluster for s in samples))


def group_lag(metrics: str, namespace: str, cluster: str) -> list[view.GroupLag]:
    """Each group's lag on each topic of the cluster, from the operator's metrics."""
    records: dict[tuple[str, str], float] = {}
    seconds: dict[tuple[str, str], float] = {}
    left: dict[tuple[str, str], float] = {}
    types: dict[str, str] = {}
    wanted = {"krafty_consumergroup_lag_sum": (records, max), "krafty_consumergroup_lag_seconds": (seconds, max),
              "krafty_consumergroup_retention_seconds_left": (left, min)}
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            labels = sample.labels
            if labels.get("namespace") != namespace or labels.get("cluster") != cluster:
                continue
            if sample.name == "krafty_consumergroup_info":
                types[labels["group"]] = labels["type"]
            if sample.name not in wanted:
                continue
            into, pick = wanted[sample.name]
            key = (labels["group"], labels["topic"])
            into[key] = pick(into[key], sample.value) if key in into else sample.value
    keys = sorted(set(records) | set(seconds) | set(left))
    return [view.GroupLag(group, topic, records.get((group, topic)), seconds.get((group, topic)),
                          left.get((group, topic)), types.get(group, "-")) for group, topic in keys]


def spec_of(document: Any) -> dict[str, Any]:
    """The spec of a KafkaCluster document (kind may be left out), or the document itself when it is a spec."""
    if not isinstance(document, dict):
        raise PluginError("the file holds no KafkaCluster: not a YAML or JSON object")
    if document.get("kind", naming.CLUSTER_KIND) != naming.CLUSTER_KIND:
        raise PluginError(f"a {document['kind']} is not a {naming.CLUSTER_KIND}")
    if "kind" not in document and "spec" not in document:
        return document
    spec = document.get("spec")
    if not isinstance(spec, dict):
        raise PluginError(f"the {naming.CLUSTER_KIND} has no spec")
    return spec


def document(path: str, name: str) -> dict[str, Any]:
    """The KafkaCluster (or its spec) in a YAML or JSON file; - for standard input. A file of several documents
    (a cluster beside its topics and users, as one applies them) gives the KafkaCluster named `name`."""
    try:
        text = sys.stdin.read() if path == "-" else pathlib.Path(path).read_text(encoding="utf-8")
        found = [d for d in yaml.safe_load_all(text) if d is not None]
    except (OSError, yaml.YAMLError) as error:
        raise PluginError(f"cannot read {path}: {error}") from error
    if len(found) == 1 and isinstance(found[0], dict):
        return found[0]
    clusters = [d for d in found if isinstance(d, dict) and d.get("kind") == naming.CLUSTER_KIND]
    named = [d for d in clusters if (d.get("metadata") or {}).get("name") == name]
    if len(named) == 1:
        return named[0]
    held = ", ".join(str((d.get("metadata") or {}).get("name")) for d in clusters) or "none"
    raise PluginError(f"{path} holds no single {naming.CLUSTER_KIND} named {name} (its {naming.CLUSTER_KIND}s: "
                      f"{held})")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    # The common flags go before or after the command, as with kubectl (SUPPRESS: a command's parser does not
    # overwrite what was given before it)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-n", "--namespace", default=argparse.SUPPRESS,
                        help="the namespace (default: the kubeconfig context's)")
    common.add_argument("--operator-selector", default=argparse.SUPPRESS,
                        help=f"labels of the operator's pods (default {OPERATOR_SELECTOR})")
    common.add_argument("--operator-namespace", default=argparse.SUPPRESS,
                        help=f"the namespace the operator is installed in (default {OPERATOR_NAMESPACE})")
    parser = argparse.ArgumentParser(prog="kubectl krafty", description=__doc__.split("\n\n")[0], parents=[common])
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, text: str) -> argparse.ArgumentParser:
        return commands.add_parser(name, help=text, parents=[common])

    status = command("status", "the cluster on one screen: nodes, roll, quorum, partitions, lag")
    plan = command("plan", "what the operator would do if a spec were applied")
    for sub in (status, plan):
        sub.add_argument("cluster")
        sub.add_argument("-o", "--output", choices=("text", "json"), default="text")
    plan.add_argument("-f", "--filename", required=True, help="the KafkaCluster to preview (YAML or JSON; -: stdin)")
    restart = command("restart", "restart one Kafka node when the roll allows")
    restart.add_argument("pod")
    restart.add_argument("--force", action="store_true",
                         help="without Kafka's checks, once every other node's pod is ready (a cluster that refuses "
                              "the operator's requests)")
    for verb in ("pause", "resume"):
        command(verb, f"{verb} the operator's changes to a cluster").add_argument("cluster")
    args = parser.parse_args(argv)
    args.namespace = getattr(args, "namespace", None)
    args.operator_selector = getattr(args, "operator_selector", OPERATOR_SELECTOR)
    args.operator_namespace = getattr(args, "operator_namespace", OPERATOR_NAMESPACE)
    return args


def run(args: argparse.Namespace, plugin: Plugin, namespace: str) -> str:
    match args.command:
        case "status":
            return plugin.status(namespace, args.cluster, args.output == "json")
        case "plan":
            return plugin.plan(namespace, args.cluster, document(args.filename, args.cluster), args.output == "json")
        case "restart":
            return plugin.restart(namespace, args.pod, args.force)
        case _:
            return plugin.pause(namespace, args.cluster, args.command == "pause")


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        kubernetes.config.load_kube_config()
        plugin = Plugin(Kube(), args.operator_selector, args.operator_namespace)
        print(run(args, plugin, args.namespace or _default_namespace()))
    except PluginError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
    except ApiException as error:
        print(f"error: the API server refused: {api_message(error)}", file=sys.stderr)
        sys.exit(1)
    except kubernetes.config.ConfigException as error:
        print(f"error: no usable kubeconfig: {error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
