"""The Helm chart: lint, schema, a real API server's dry run, CRDs in step with crds/, shipped rules and dashboard."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from krafty.model.versions import SUPPORTED_KAFKA_VERSIONS
from krafty.render.cluster import children
from krafty.runtime import permissions
from krafty_testkit.apiserver import LocalApiServer
from krafty_testkit.tools import checkov, helm
from krafty_testkit.waiting import wait_for

from ..conftest import CRDS, REPO, context

CHART = REPO / "charts" / "krafty-operator"
CI_VALUES = sorted((CHART / "ci").glob("*.yaml"))
KUBE_VERSION = "1.34.0"


def run_helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(helm()), *args], capture_output=True, text=True, timeout=120, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed:\n{proc.stderr}{proc.stdout}")
    return proc


def test_lint_strict_passes_for_every_values_file():
    run_helm("lint", "--strict", str(CHART))
    for values in CI_VALUES:
        run_helm("lint", "--strict", str(CHART), "-f", str(values))


def test_chart_crds_are_identical_to_the_source_of_truth():
    for crd in CRDS.glob("*.yaml"):
        assert (CHART / "crds" / crd.name).read_text() == crd.read_text(), f"copy crds/{crd.name} into the chart"
    assert sorted(p.name for p in (CHART / "crds").glob("*.yaml")) == sorted(p.name for p in CRDS.glob("*.yaml"))


def test_every_value_is_documented():
    text = (CHART / "values.yaml").read_text()
    documented = set(re.findall(r"^## @param (\S+)", text, re.M))

    def leaves(node: object, prefix: str = "") -> set[str]:
        if isinstance(node, dict) and node:
            out: set[str] = set()
            for key, value in node.items():
                path = f"{prefix}{key}"
                out |= {path} if path in documented else leaves(value, f"{path}.")
            return out
        return {prefix.rstrip(".")}

    missing = leaves(yaml.safe_load(text)) - documented
    assert not missing, f"values without a ## @param line: {sorted(missing)}"


def test_the_chart_readme_is_generated_from_the_values():
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "chart-readme.py"), "--check"], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_conventions_users_expect_a_subchart_renamed_objects_and_their_own_security_context():
    # Given the chart as a subchart (global values), renamed, on a platform that assigns the UID
    rendered = run_helm("template", "rel", str(CHART), "--kube-version", KUBE_VERSION,
                        "--set", "global.imageRegistry=registry.example", "--set", "fullnameOverride=kafka-ops",
                        "--set", "nameOverride=kafka-operator").stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    # Then every object carries the new names, and nothing fixes a UID
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    assert deployment["metadata"]["name"] == "kafka-ops"
    assert deployment["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] == "kafka-operator"
    assert {d["metadata"]["name"] for d in docs if d["kind"] == "ServiceAccount"} == {"kafka-ops"}
    assert "runAsUser" not in rendered
    # And a platform's own security context replaces ours
    own = run_helm("template", "rel", str(CHART), "--kube-version", KUBE_VERSION, "--set",
                   "podSecurityContext.runAsUser=1000680000", "--set", "securityContext.privileged=false").stdout
    pod = next(d for d in yaml.safe_load_all(own) if d and d["kind"] == "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == 1000680000
    assert pod["containers"][0]["securityContext"]["privileged"] is False


@pytest.mark.parametrize(("setting", "named"), [
    ("image.pullPolicy=Sometimes", "/image/pullPolicy"),
    ("metrics.port=80", "/metrics/port"),
    ("watchNamespaces[0]=Not_A_Namespace", "/watchNamespaces/0"),
    ("logLevel=TRACE", "/logLevel"),
    ("unknownValue=1", "unknownValue"),
    ("kafkaClusters[0].name=demo", "/kafkaClusters/0"),
    ("brokerImage.overrides.4\\.1\\.0=registry.local/kafka:4.1.0", "propertyName '4.1.0'"),
    ("brokerImage.tag=4.3.1", "/brokerImage"),
    ("networkPolicy.metricsFrom[0].podSelectr.app=prometheus", "/networkPolicy/metricsFrom/0"),
    ("networkPolicy.enabled=yes", "/networkPolicy/enabled"),
    ("clusterPolicy.requireTLS=true", "/clusterPolicy"),
    ("tenantRoles.aggregated=false", "/tenantRoles"),
])
def test_bad_values_are_refused_naming_the_value(setting: str, named: str):
    # (brokerImage.overrides: only the Kafka versions the operator runs; brokerImage.tag: gone, one image per version)
    proc = run_helm("template", "t", str(CHART), "--kube-version", KUBE_VERSION, "--set", setting, check=False)
    assert proc.returncode != 0, f"{setting} was accepted"
    assert named in proc.stderr, proc.stderr


@pytest.fixture(scope="module")
def api(apiserver: LocalApiServer) -> LocalApiServer:
    apiserver.kubectl("apply", "--server-side", "-f", str(CRDS))
    apiserver.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    for namespace in ("krafty", "kafka", "streaming"):
        apiserver.kubectl("create", "namespace", namespace, check=False)
    return apiserver


@pytest.mark.parametrize("values", CI_VALUES, ids=lambda p: p.name)
def test_rendered_chart_passes_a_server_side_dry_run(api: LocalApiServer, values: Path):
    rendered = run_helm("template", "krafty", str(CHART), "-n", "krafty", "--kube-version", KUBE_VERSION,
                        "-f", str(values)).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    assert any(d["kind"] == "Deployment" for d in docs)
    # (no -n: Roles for watched namespaces carry their own namespace; objects other tests of the session applied
    # with their own field manager are no conflict for a dry run)
    proc = api.kubectl("apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", "-", input=rendered,
                       check=False)
    assert proc.returncode == 0, proc.stderr


def _granted(rules: list[dict[str, Any]]) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for rule in rules:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                out.setdefault((group, resource), set()).update(rule["verbs"])
    return out


@pytest.mark.parametrize("values", ["default-values.yaml", "namespaced-values.yaml"])
def test_the_rbac_grants_exactly_what_the_operator_lists_as_used(values: str):
    rendered = run_helm("template", "krafty", str(CHART), "--kube-version", KUBE_VERSION,
                        "-f", str(CHART / "ci" / values)).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    rules = [d["rules"] for d in docs if d["kind"] in ("Role", "ClusterRole") and d["metadata"]["name"] == "krafty"]
    assert rules
    expected = {resource: set(verbs) for resource, verbs in permissions.WATCHED_NAMESPACES.items()}
    assert all(_granted(r) == expected for r in rules)


def test_the_uninstall_hook_runs_as_its_own_account_with_only_what_it_uses():
    rendered = run_helm("template", "krafty", str(CHART), "--kube-version", KUBE_VERSION, "-n", "platform",
                        "--set", "kafkaClusters[0].name=demo",
                        "--set", "kafkaClusters[0].spec.brokers.replicas=3").stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    [job] = [d for d in docs if d["kind"] == "Job"]
    assert job["spec"]["template"]["spec"]["serviceAccountName"] == "krafty-uninstall"
    hook = {d["kind"]: d for d in docs if d["metadata"]["name"] == "krafty-uninstall" and d["kind"] != "Job"}
    assert sorted(hook) == ["Role", "RoleBinding", "ServiceAccount"]
    # made before the Job (a lower weight), in the release's namespace only, and removed with it
    for made in hook.values():
        annotations = made["metadata"]["annotations"]
        assert (annotations["helm.sh/hook"], int(annotations["helm.sh/hook-weight"])) == ("pre-delete", -10)
        assert made["metadata"]["namespace"] == "platform"
    assert _granted(hook["Role"]["rules"]) == {resource: set(verbs)
                                               for resource, verbs in permissions.UNINSTALL_HOOK.items()}
    assert hook["RoleBinding"]["subjects"] == [{"kind": "ServiceAccount", "name": "krafty-uninstall",
                                                "namespace": "platform"}]
    # And the operator's own rights no longer delete what the hook deletes
    [operator] = [d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "krafty"]
    assert not any("delete" in verbs for resource, verbs in _granted(operator["rules"]).items()
                   if resource in permissions.UNINSTALL_HOOK)


def test_namespaced_install_writes_nothing_cluster_wide():
    rendered = run_helm("template", "krafty", str(CHART), "--kube-version", KUBE_VERSION,
                        "-f", str(CHART / "ci" / "namespaced-values.yaml")).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    roles = {d["metadata"]["name"]: d["rules"] for d in docs if d["kind"] == "ClusterRole"}
    # Without rack awareness: kopf's discovery and the StorageClasses, read-only; and the users' rights on the
    # krafty kinds, which only Kubernetes' own namespace roles aggregate (nothing binds them)
    assert sorted(roles) == ["krafty-discovery", "krafty-edit", "krafty-view"]
    assert not [d for d in docs if d["kind"] in ("ClusterRoleBinding", "RoleBinding")
                and d["roleRef"]["name"] in ("krafty-edit", "krafty-view")]
    assert all(set(rule["verbs"]) <= {"get", "list", "watch"} for rule in roles["krafty-discovery"])
    granted = _granted(roles["krafty-discovery"])
    assert all(granted.get(resource) == set(verbs) for resource, verbs in permissions.CLUSTER_READS.items())
    watched = {d["metadata"]["namespace"] for d in docs if d["kind"] == "Role" and d["metadata"]["name"] == "krafty"}
    assert watched == {"kafka", "streaming"}
    # In its own namespace: its Lease (get and update by name) and the Events about it
    [election] = [d for d in docs if d["kind"] == "Role" and d["metadata"]["name"] == "krafty-leader-election"]
    assert election["metadata"]["namespace"] == "default"
    assert {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "update"],
            "resourceNames": ["krafty"]} in election["rules"]


def test_rack_awareness_grants_one_binding_by_name_and_no_other_cluster_wide_write():
    rendered = run_helm("template", "krafty", str(CHART), "--kube-version", KUBE_VERSION,
                        "-f", str(CHART / "ci" / "namespaced-values.yaml"),
                        "--set", "rackAwareness.enabled=true").stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    roles = {d["metadata"]["name"]: d["rules"] for d in docs if d["kind"] == "ClusterRole"}
    assert sorted(roles) == ["krafty-discovery", "krafty-edit", "krafty-kafka-rack", "krafty-rack-binder",
                             "krafty-view"]
    assert roles["krafty-kafka-rack"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]
    # The operator may read and update the one binding the chart made, and bind its one role, by name:
    # no create or delete of any binding
    assert roles["krafty-rack-binder"] == [
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterrolebindings"], "verbs": ["get", "update"],
         "resourceNames": ["krafty-kafka-rack"]},
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind"],
         "resourceNames": ["krafty-kafka-rack"]}]
    [binding] = [d for d in docs if d["kind"] == "ClusterRoleBinding" and d["metadata"]["name"] == "krafty-kafka-rack"]
    assert binding["roleRef"]["name"] == "krafty-kafka-rack"
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["KRAFTY_RACK_BINDING"] == "krafty-kafka-rack"


def test_replicas_elect_a_leader_and_the_monitor_keeps_the_clusters_namespace():
    rendered = run_helm("template", "krafty", str(CHART), "--kube-version", KUBE_VERSION,
                        "--api-versions", "monitoring.coreos.com/v1/ServiceMonitor").stdout
    docs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(rendered) if d}
    deployment = docs[("Deployment", "krafty")]["spec"]
    # Two replicas by default, replaced one at a time (a standby is up before the leader goes)
    assert deployment["replicas"] == 2
    assert deployment["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
    [container] = deployment["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert env["KRAFTY_LEADER_LEASE"] == "krafty"
    assert env["KRAFTY_POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    # Spread over nodes where it can be
    spread = deployment["template"]["spec"]["affinity"]["podAntiAffinity"]
    assert spread["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]["topologyKey"] == \
        "kubernetes.io/hostname"
    # Every replica scraped, its series' namespace label kept (the Kafka cluster's)
    [endpoint] = docs[("ServiceMonitor", "krafty")]["spec"]["endpoints"]
    assert endpoint["honorLabels"] is True


def test_shipped_alert_rules_pass_promtool():
    proc = subprocess.run(["promtool", "check", "rules", str(CHART / "files" / "prometheus-rules.yaml")],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS: 17 rules found" in proc.stdout


def test_dashboard_is_valid_json_with_queries():
    dashboard = json.loads((CHART / "files" / "dashboards" / "krafty.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(exprs) >= 20
    assert all(expr.strip() for expr in exprs)


# checkov findings kept on purpose, each with why (anything else fails the test below)
EXPLAINED = {
    "CKV_K8S_11": "no CPU limits: a limit throttles Kafka's and the operator's threads under load (CFS quotas); "
                  "requests reserve the CPU, and resources are the user's to set",
    "CKV_K8S_15": "pull policy IfNotPresent: images are pinned by tag (the Kafka version); Always would make every "
                  "restart in a roll depend on the registry",
    "CKV_K8S_43": "images by tag, not digest: a user pins a digest through image.tag and brokerImage.tag "
                  "(repository@sha256:...), which the chart passes through",
    "CKV_K8S_40": "UID 1001, not above 10000: the images' user; existing volumes belong to it (fsGroup 1001), and "
                  "platforms that assign a UID override it (the chart fixes none)",
    "CKV_K8S_38": "the operator's token is mounted: it is a Kubernetes client (Kafka pods mount none unless rack "
                  "awareness needs it)",
    "CKV_K8S_13": "a cluster that sets no resources gets no memory limit: a limit the operator guessed would kill "
                  "a broker whose page cache and heap the user sized (the heap is 1 GiB unless resources or "
                  "jvm.heap say otherwise); resources are the user's to set, as every example does",
    "CKV_K8S_8": "the helm test pod runs one check and exits: no liveness probe to have",
    "CKV_K8S_9": "the helm test pod runs one check and exits: no readiness probe to have",
}


def test_checkov_finds_nothing_unexplained_in_the_chart_and_the_kafka_workloads(tmp_path: Path):
    # Given the chart as installed by default (every namespace watched) and with rack awareness on, a dedicated
    # cluster's rendered Kafka workloads, and those of a new cluster that sets nothing but its broker count
    (tmp_path / "chart.yaml").write_text(run_helm("template", "krafty", str(CHART), "-n", "krafty-system",
                                                  "--kube-version", KUBE_VERSION, "--set",
                                                  "rackAwareness.enabled=true").stdout)
    (tmp_path / "default-install.yaml").write_text(run_helm("template", "krafty", str(CHART), "-n", "krafty-system",
                                                            "--kube-version", KUBE_VERSION).stdout)
    spec = yaml.safe_load((CRDS / "examples" / "kafkacluster-dedicated.yaml").read_text())["spec"]
    for name, cluster_spec in (("prod", spec), ("fresh", {"brokers": {"replicas": 3}})):
        workloads = [c.desired for c in children(context(cluster_spec, name=name)) if c.desired is not None]
        (tmp_path / f"kafka-{name}.yaml").write_text(yaml.safe_dump_all(workloads))
    # When checkov checks them
    proc = subprocess.run([str(checkov()), "-d", str(tmp_path), "--framework", "kubernetes", "--quiet",
                           "--compact", "-o", "json"], capture_output=True, text=True, check=False, timeout=300)
    reports = json.loads(proc.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    failed = [(f["check_id"], f["resource"]) for report in reports for f in report["results"]["failed_checks"]]
    passed = sum(report["summary"]["passed"] for report in reports)
    # Then it checked them, and every finding is one the table above explains
    assert passed > 100, proc.stderr[-2000:]
    unexplained = sorted({finding for finding in failed if finding[0] not in EXPLAINED})
    assert not unexplained, unexplained


def test_the_broker_image_overrides_name_exactly_the_versions_the_operator_runs():
    schema = json.loads((CHART / "values.schema.json").read_text())
    overrides = schema["properties"]["brokerImage"]["properties"]["overrides"]
    assert tuple(overrides["propertyNames"]["enum"]) == SUPPORTED_KAFKA_VERSIONS


def test_the_operators_pods_let_in_only_scrapes_of_their_metrics_port():
    # Given the chart as installed by default, and with the policy switched off
    docs = [d for d in yaml.safe_load_all(run_helm("template", "krafty", str(CHART), "-n", "krafty-system",
                                                   "--kube-version", KUBE_VERSION).stdout) if d]
    off = run_helm("template", "krafty", str(CHART), "--kube-version", KUBE_VERSION,
                   "--set", "networkPolicy.enabled=false").stdout
    [policy] = [d for d in docs if d["kind"] == "NetworkPolicy"]
    pods = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["metadata"]["labels"]
    test_pod = next(d for d in docs if d["kind"] == "Pod")["metadata"]["labels"]
    # Then it selects the operator's pods and lets in one port, the metrics', from Prometheus and the helm test
    selected = policy["spec"]["podSelector"]["matchLabels"]
    assert selected.items() <= pods.items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    [rule] = policy["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 8080}]
    prometheus, helm_test = rule["from"]
    assert prometheus == {"namespaceSelector": {}, "podSelector": {"matchLabels": {"app.kubernetes.io/name":
                                                                                   "prometheus"}}}
    assert helm_test["podSelector"]["matchLabels"].items() <= test_pod.items()
    assert "kind: NetworkPolicy" not in off


def test_namespace_users_get_the_krafty_kinds_through_kubernetes_own_roles():
    docs = [d for d in yaml.safe_load_all(run_helm("template", "krafty", str(CHART), "--kube-version",
                                                   KUBE_VERSION).stdout) if d]
    roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterRole"}
    edit, view = roles["krafty-edit"], roles["krafty-view"]
    aggregated = {label for label, value in edit["metadata"]["labels"].items() if value == "true"}
    assert aggregated == {"rbac.authorization.k8s.io/aggregate-to-admin",
                          "rbac.authorization.k8s.io/aggregate-to-edit"}
    assert view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    # Only the krafty kinds, and view only reads
    assert {group for rule in edit["rules"] + view["rules"] for group in rule["apiGroups"]} == {"kafka.krafty.io"}
    assert {verb for rule in view["rules"] for verb in rule["verbs"]} == {"get", "list", "watch"}
    off = run_helm("template", "krafty", str(CHART), "--kube-version", KUBE_VERSION,
                   "--set", "tenantRoles.aggregate=false").stdout
    assert "krafty-edit" not in off


def kafka_cluster(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "kafka.krafty.io/v1alpha1", "kind": "KafkaCluster",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"brokers": {"replicas": 3}, **spec}}


POLICED = "policed"
SECURE = {"listeners": [{"name": "tls", "port": 9094, "tls": True, "authentication": "scram-sha-512"}],
          "authorization": {"enabled": True}}


def test_an_install_wide_policy_refuses_clusters_below_it_and_keeps_those_that_run(api: LocalApiServer):
    # Given a plaintext cluster that runs in a watched namespace before the policy is installed
    api.kubectl("create", "namespace", POLICED, check=False)
    api.apply(kafka_cluster("before", POLICED))
    # When the chart is installed taking TLS, authenticated listeners and authorization only (the policy objects)
    rendered = run_helm("template", "krafty", str(CHART), "-n", "krafty", "--kube-version", KUBE_VERSION,
                        "--set", f"watchNamespaces={{{POLICED}}}", "--set", "clusterPolicy.requireTls=true",
                        "--set", "clusterPolicy.requireAuthentication=true",
                        "--set", "clusterPolicy.requireAuthorization=true").stdout
    policy = [d for d in yaml.safe_load_all(rendered) if d and d["kind"].startswith("ValidatingAdmissionPolicy")
              and d["metadata"]["name"].endswith("cluster-policy")]
    assert [d["kind"] for d in policy] == ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    try:
        for doc in policy:
            api.apply(doc)
        # Then a new plaintext cluster is refused by the API server, naming each field below the policy
        # (created as a dry run until then: a cluster made before it took hold would be one that runs)
        refused = wait_for(lambda: api.kubectl("create", "--dry-run=server", "-f", "-", check=False,
                                               input=json.dumps(kafka_cluster("plain", POLICED))),
                           lambda proc: proc.returncode != 0, 30, "the policy in force")
        assert "spec.listeners: plain without tls: true" in refused.stderr, refused.stderr
        assert "spec.listeners: plain without authentication" in refused.stderr
        assert "spec.authorization.enabled must be true" in refused.stderr
        assert api.kubectl("get", "kafkacluster", "plain", "-n", POLICED, check=False).returncode != 0
        # And one that meets it is taken, as is a plaintext one in a namespace the install does not watch
        api.apply(kafka_cluster("secure", POLICED, **SECURE))
        api.apply(kafka_cluster("elsewhere", "kafka"))
        # And the cluster that ran before keeps what it runs: its labels and status still change
        api.kubectl("label", "kafkacluster", "before", "-n", POLICED, "team=a")
        api.kubectl("patch", "kafkacluster", "before", "-n", POLICED, "--subresource", "status", "--type",
                    "merge", "-p", json.dumps({"status": {"observedGeneration": 1}}))
        # Until its spec is written: then it must meet the policy as well
        changed = api.kubectl("patch", "kafkacluster", "before", "-n", POLICED, "--type", "merge", "-p",
                              json.dumps({"spec": {"brokers": {"replicas": 4}}}), check=False)
        assert changed.returncode != 0
        assert "without tls: true" in changed.stderr, changed.stderr
        api.kubectl("patch", "kafkacluster", "before", "-n", POLICED, "--type", "merge", "-p",
                    json.dumps({"spec": SECURE}))
    finally:
        for doc in reversed(policy):
            api.kubectl("delete", doc["kind"].lower(), doc["metadata"]["name"], "--ignore-not-found")
        api.kubectl("delete", "kafkaclusters", "--all", "-n", POLICED)
        api.kubectl("delete", "kafkacluster", "elsewhere", "-n", "kafka", "--ignore-not-found")


PLANNERS = "planners"


def _plan(cluster: str) -> dict[str, Any]:
    return {"apiVersion": "kafka.krafty.io/v1alpha1", "kind": "KafkaClusterPlan",
            "metadata": {"generateName": f"{cluster}-plan-", "namespace": PLANNERS},
            "spec": {"clusterRef": {"name": cluster}, "spec": {"brokers": {"replicas": 4}}}}


def _role(name: str, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A Role in the planners' namespace, bound to the user of the same name."""
    return [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
             "metadata": {"name": name, "namespace": PLANNERS}, "rules": rules},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": name, "namespace": PLANNERS},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
             "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name}]}]


def test_a_plan_is_taken_only_from_whoever_may_update_the_cluster_it_names(api: LocalApiServer):
    # Given the chart's plan policy, a cluster, and three users of its namespace: one who may only create plans,
    # one who may also update that cluster (as Kubernetes' edit role may), one who may only update it
    docs = [d for d in yaml.safe_load_all(run_helm("template", "krafty", str(CHART), "-n", "krafty",
                                                   "--kube-version", KUBE_VERSION).stdout) if d]
    policy = [d for d in docs if d["kind"].startswith("ValidatingAdmissionPolicy")
              and d["metadata"]["name"].endswith("plan-policy")]
    assert [d["kind"] for d in policy] == ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    api.kubectl("create", "namespace", PLANNERS, check=False)
    api.apply(kafka_cluster("prod", PLANNERS))
    plans = {"apiGroups": ["kafka.krafty.io"], "resources": ["kafkaclusterplans"], "verbs": ["create", "get"]}
    update = {"apiGroups": ["kafka.krafty.io"], "resources": ["kafkaclusters"], "verbs": ["update"]}
    for doc in [*_role("only-plans", [plans]), *_role("editor", [plans, update]), *_role("updater", [update]),
                *policy]:
        api.apply(doc)

    def create_as(user: str, cluster: str = "prod") -> subprocess.CompletedProcess[str]:
        return api.kubectl("create", "--as", user, "-f", "-", "-o", "name", check=False,
                           input=json.dumps(_plan(cluster)))

    try:
        # When each asks for a plan of the cluster, Then the API server takes the editor's and refuses the one
        # who may not update the cluster, naming the right (once the policy is in force)
        refused = wait_for(lambda: create_as("only-plans"), lambda proc: proc.returncode != 0, 30,
                           "the plan policy in force")
        assert "a plan of KafkaCluster prod needs the right to update it (update kafkaclusters in namespace " \
               "planners)" in refused.stderr, refused.stderr
        made = create_as("editor")
        assert made.returncode == 0, made.stderr
        assert made.stdout.startswith("kafkaclusterplan.kafka.krafty.io/prod-plan-")
        # And whoever may not create plans is refused by RBAC, naming the resource
        forbidden = create_as("updater")
        assert 'cannot create resource "kafkaclusterplans"' in forbidden.stderr, forbidden.stderr
        # And a plan of a cluster the editor may update but that does not exist yet is taken (the operator says
        # ClusterNotFound in its status)
        assert create_as("editor", "later").returncode == 0
    finally:
        for doc in reversed(policy):
            api.kubectl("delete", doc["kind"].lower(), doc["metadata"]["name"], "--ignore-not-found")
        api.kubectl("delete", "namespace", PLANNERS, "--wait=false")
