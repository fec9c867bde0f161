"""What `helm uninstall` runs first (the chart's pre-delete hook), while the operator still runs:
`python3 -m krafty.cli.uninstall --namespace NS --selector KEY=VALUE`.

Helm deletes custom resources last, after the operator and its RBAC: a
KafkaCluster or Topic made from the chart's values would then keep the
operator's finalizer with no operator left to remove it. This deletes them
first and waits until the operator has torn them down in order. Bounded: what
is still there after --timeout seconds loses the operator's finalizers (a
stopped operator, a stuck node), so an uninstall never strands an object.
"""

from __future__ import annotations

import argparse
import logging
import time
from typing import Any

from krafty import naming
from krafty.clients import kube as kube_client

log = logging.getLogger("krafty.cli.uninstall")
KINDS = (naming.TOPIC_KIND, naming.CLUSTER_KIND)
FINALIZERS = {naming.TOPIC_KIND: naming.TOPIC_FINALIZER, naming.CLUSTER_KIND: naming.CLUSTER_FINALIZER}


def remaining(kube: kube_client.Kube, namespace: str, selector: dict[str, str]) -> list[tuple[str, dict[str, Any]]]:
    return [(kind, body) for kind in KINDS for body in kube.list(kind, namespace, selector)]


def run(kube: kube_client.Kube, namespace: str, selector: dict[str, str], timeout: float, interval: float = 2) -> int:
    """Deletes the selected Topics and KafkaClusters and waits for them; returns how many had to be let go."""
    for kind, body in remaining(kube, namespace, selector):
        log.info("deleting %s %s/%s", kind, namespace, body["metadata"]["name"])
        kube.delete(kind, body["metadata"]["name"], namespace)
    started = time.monotonic()
    while left := remaining(kube, namespace, selector):
        waited = time.monotonic() - started
        if waited > timeout:
            for kind, body in left:
                log.warning("%s %s/%s still there after %.0f s: removing the operator's finalizer", kind,
                            namespace, body["metadata"]["name"], waited)
                kube.remove_finalizer(kind, body, FINALIZERS[kind])
            return len(left)
        log.info("%.0f s: waiting for %s", waited, ", ".join(f"{k} {b['metadata']['name']}" for k, b in left))
        time.sleep(interval)
    log.info("every selected Topic and KafkaCluster is gone after %.0f s", time.monotonic() - started)
    return 0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="krafty.cli.uninstall", description=__doc__)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--selector", required=True, help="label KEY=VALUE of the resources to delete")
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    key, _, value = args.selector.partition("=")
    kube_client.load_config()
    run(kube_client.Kube(), args.namespace, {key: value}, args.timeout)


if __name__ == "__main__":
    main()
