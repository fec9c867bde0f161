"""What the operator asks of the Kubernetes API in the namespaces it watches, and why: its RBAC, exactly.

The chart's Role/ClusterRole (charts/krafty-operator/templates/rbac.yaml, "krafty.rules") grants this and
nothing more: test_chart compares the two, and the integration tests run the cluster, topic and rack passes
with the chart's rights only (impersonating the operator's account), so a verb missing here fails them.
Leader election (its Lease and Events in the operator's own namespace), rack awareness (one
ClusterRoleBinding, by name) and kopf's discovery (CRDs, namespaces) have rules of their own in the chart;
so has what it reads at cluster scope (CLUSTER_READS).
"""

from __future__ import annotations

Resource = tuple[str, str]  # (API group, resource)

WATCHED_NAMESPACES: dict[Resource, dict[str, str]] = {
    ("kafka.krafty.io", "kafkaclusters"): {
        "get": "the cluster pass reads its KafkaCluster",
        "list": "kopf watches them", "watch": "kopf watches them",
        "patch": "the ordered-teardown finalizer, added and removed"},
    ("kafka.krafty.io", "topics"): {
        "list": "the topic pass reads its cluster's Topics; kopf watches them", "watch": "kopf watches them",
        "patch": "kopf's deletion finalizer and progress annotations"},
    ("kafka.krafty.io", "kafkausers"): {
        "list": "the user pass reads its cluster's KafkaUsers; kopf watches them", "watch": "kopf watches them",
        "patch": "the user-cleanup finalizer"},
    ("kafka.krafty.io", "kafkaclusterplans"): {
        "get": "the plan pass reads the plan to make", "list": "kopf watches them", "watch": "kopf watches them"},
    ("kafka.krafty.io", "kafkaclusters/status"): {"patch": "status and conditions"},
    ("kafka.krafty.io", "kafkaclusterplans/status"): {"patch": "the plan, written into status"},
    ("kafka.krafty.io", "topics/status"): {"patch": "status and conditions"},
    ("kafka.krafty.io", "kafkausers/status"): {"patch": "status and conditions"},
    ("", "pods"): {
        "list": "the cluster pass observes its pods", "watch": "kopf: a Kafka pod's change pokes a pass",
        "create": "preflight pods (server-side apply of a new pod)", "patch": "preflight pods (server-side apply)",
        "delete": "a restart in a roll, a preflight pod done"},
    ("", "secrets"): {
        "get": "the PKI, users' credentials, configFromSecrets (by name: never listed)",
        "create": "server-side apply of a new Secret", "patch": "server-side apply"},
    ("", "configmaps"): {
        "get": "the cluster's identity (cluster id, voters)", "create": "server-side apply of a new ConfigMap",
        "patch": "server-side apply", "delete": "a child the spec no longer asks for"},
    ("", "persistentvolumeclaims"): {
        "list": "which volumes a cluster has, and how their growth stands",
        "patch": "a larger storage.size asked of each claim", "delete": "volumes of removed nodes (deleteClaim)"},
    ("", "services"): {
        "get": "a child not sent yet is looked at first: one of its name that is not the cluster's is left alone",
        "list": "the node ports and load-balancer addresses of nodeport and loadbalancer listeners",
        "create": "server-side apply of a new Service", "patch": "server-side apply",
        "delete": "a Service the spec no longer asks for"},
    ("", "serviceaccounts"): {
        "get": "a child not sent yet is looked at first: one of its name that is not the cluster's is left alone",
        "create": "server-side apply of the Kafka pods' account", "patch": "server-side apply",
        "delete": "a child the spec no longer asks for"},
    ("", "events"): {
        "get": "an Event told before is counted, not repeated", "create": "every decision", "patch": "its count"},
    ("apps", "statefulsets"): {
        "get": "a pool's StatefulSet as it runs", "create": "server-side apply of a new pool",
        "patch": "server-side apply", "delete": "a pool scaled away, the ordered teardown"},
    ("policy", "poddisruptionbudgets"): {
        "get": "a child not sent yet is looked at first: one of its name that is not the cluster's is left alone",
        "create": "server-side apply", "patch": "server-side apply", "delete": "a budget no longer asked for"},
    ("networking.k8s.io", "networkpolicies"): {
        "get": "a child not sent yet is looked at first: one of its name that is not the cluster's is left alone",
        "create": "server-side apply", "patch": "server-side apply", "delete": "spec.networkPolicy turned off"},
    ("coordination.k8s.io", "leases"): {
        "get": "the install's claim on the namespace (another install watching it stays out)",
        "create": "the claim, first made", "update": "the claim renewed, taken over or let go"},
}

# The chart's uninstall hook (krafty.cli.uninstall) runs as an account of its own, with these rights in the release's
# namespace only (uninstall-hook.yaml): the operator itself never deletes a KafkaCluster, Topic or KafkaUser.
UNINSTALL_HOOK: dict[Resource, dict[str, str]] = {
    (group, resource): {"list": "the release's resources, by its instance label", "delete": "each of them, first",
                        "patch": "the operator's finalizer, removed if the operator did not in time"}
    for group, resource in (("kafka.krafty.io", "kafkaclusters"), ("kafka.krafty.io", "topics"),
                            ("kafka.krafty.io", "kafkausers"))}

# Read at cluster scope, never written (the chart's discovery ClusterRole holds these besides kopf's own)
CLUSTER_READS: dict[Resource, dict[str, str]] = {
    ("storage.k8s.io", "storageclasses"): {"get": "whether a claim's class lets it grow (allowVolumeExpansion)"},
    ("", "nodes"): {"get": "whether the Kubernetes node of a Kafka pod that is not ready is lost (named in status)",
                    "list": "every node's address, which the brokers' certificates name for a TLS nodeport listener"},
}
