"""What can be checked of the Kubernetes side without a cluster: manifests, submit script, entrypoint, Dockerfile."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest
import yaml

from krafty_spark.config import DEFAULT_CA_FILE, DEFAULT_CONNECTION_DIR, DEFAULT_USER_DIR, parse_args
from krafty_spark.session import SPARK_DIR

K8S = SPARK_DIR / "k8s"
ENTRYPOINT = SPARK_DIR / "docker" / "entrypoint.sh"
MOUNTED = {"bootstrap.servers": "prod-kafka-bootstrap.kafka.svc.cluster.local:9092"}


def documents(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((K8S / name).read_text()) if d]


def by_kind(name: str) -> dict[str, dict]:
    return {d["kind"]: d for d in documents(name)}


def test_every_manifest_parses_and_names_its_kind():
    kinds = sorted(d["kind"] for path in K8S.glob("*.yaml") for d in documents(path.name))
    assert kinds == ["PersistentVolumeClaim", "Pod", "Pod", "Role", "Role", "RoleBinding", "RoleBinding",
                     "ServiceAccount", "SparkApplication", "Topic"]


def test_the_driver_role_is_namespaced_and_least_privilege():
    rbac = by_kind("rbac.yaml")
    rules = {(resource, verb) for rule in rbac["Role"]["rules"] for resource in rule["resources"]
             for verb in rule["verbs"] if rule["apiGroups"] == [""]}
    lifecycle = {"get", "list", "watch", "create", "delete", "deletecollection"}
    assert rules == ({("pods", v) for v in [*lifecycle, "patch"]}
                     | {(r, v) for r in ("services", "configmaps", "persistentvolumeclaims") for v in lifecycle})
    assert all(rule["apiGroups"] == [""] for rule in rbac["Role"]["rules"])
    binding = rbac["RoleBinding"]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": rbac["Role"]["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": rbac["ServiceAccount"]["metadata"]["name"]}]


@pytest.mark.parametrize("role", ["driver", "executor"])
def test_pod_templates_mount_the_connection_configmap_where_the_job_reads_it(role):
    pod = documents(f"{role}-pod-template.yaml")[0]
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    container = pod["spec"]["containers"][0]
    assert container["name"] == f"spark-kubernetes-{role}"
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["kafka-connection"] == {"name": "kafka-connection", "mountPath": str(DEFAULT_CONNECTION_DIR),
                                          "readOnly": True}
    assert volumes["kafka-connection"]["configMap"]["name"] == "prod-kafka-connection"
    # And the cluster CA's certificates where the job looks for them over TLS
    assert mounts["kafka-ca"] == {"name": "kafka-ca", "mountPath": str(DEFAULT_CA_FILE.parent), "readOnly": True}
    assert volumes["kafka-ca"]["secret"] == {"secretName": "prod-cluster-ca-cert",
                                             "items": [{"key": "ca.crt", "path": DEFAULT_CA_FILE.name}]}
    # And the Secret of the KafkaUser the job runs as, if it exists, where the job looks for it
    assert mounts["kafka-user"] == {"name": "kafka-user", "mountPath": str(DEFAULT_USER_DIR), "readOnly": True}
    assert volumes["kafka-user"]["secret"] == {"secretName": "pageviews", "optional": True}
    claim = documents("pvc.yaml")[0]["metadata"]["name"]
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == claim
    assert mounts["data"]["mountPath"] == "/data"
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_executors_follow_the_driver_to_its_node_because_the_volume_is_read_write_once():
    assert documents("pvc.yaml")[0]["spec"]["accessModes"] == ["ReadWriteOnce"]
    driver = documents("driver-pod-template.yaml")[0]
    executor = documents("executor-pod-template.yaml")[0]
    term = executor["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == {"spark.krafty.io/job": "pageviews", "spark-role": "driver"}
    assert driver["metadata"]["labels"]["spark.krafty.io/job"] == "pageviews"


def test_spark_application_runs_the_image_job_with_valid_options():
    app = documents("spark-application.yaml")[0]
    spec = app["spec"]
    assert (app["apiVersion"], spec["type"], spec["mode"]) == ("sparkoperator.k8s.io/v1beta2", "Python", "cluster")
    assert spec["mainApplicationFile"] == "local:///opt/krafty/jobs/pageviews.py"
    assert "COPY spark/jobs/pageviews.py /opt/krafty/jobs/pageviews.py" in (SPARK_DIR / "Dockerfile").read_text()
    assert spec["driver"]["serviceAccount"] == by_kind("rbac.yaml")["ServiceAccount"]["metadata"]["name"]
    assert spec["restartPolicy"]["type"] == "Always"
    options = parse_args(spec["arguments"], mounted=MOUNTED)
    assert options.checkpoint.startswith("/data/")
    assert options.output_path is not None
    assert options.output_path.startswith("/data/")
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["kafka-connection"]["configMap"]["name"] == "prod-kafka-connection"
    assert volumes["kafka-ca"]["secret"]["secretName"] == "prod-cluster-ca-cert"
    for role in ("driver", "executor"):
        mounts = {m["name"]: m["mountPath"] for m in spec[role]["volumeMounts"]}
        assert mounts == {"kafka-connection": str(DEFAULT_CONNECTION_DIR), "kafka-ca": str(DEFAULT_CA_FILE.parent),
                          "kafka-user": str(DEFAULT_USER_DIR), "data": "/data"}
    # And it runs as the KafkaUser named after it, when there is one
    assert volumes["kafka-user"]["secret"] == {"secretName": app["metadata"]["name"], "optional": True}


def test_spark_application_is_a_stream_restarted_always_with_a_short_trigger_and_its_resources_requested():
    spec = documents("spark-application.yaml")[0]["spec"]
    options = parse_args(spec["arguments"], mounted=MOUNTED)
    assert options.trigger is not None
    assert options.trigger.spark_interval == "5 seconds"
    assert spec["restartPolicy"]["type"] == "Always"
    assert spec["restartPolicy"]["onFailureRetryInterval"] <= 10
    # (a quarter core each, as submit.sh asks: Spark's default would be a whole core per pod)
    assert (spec["driver"]["coreRequest"], spec["executor"]["coreRequest"]) == ("250m", "250m")


def test_spark_application_serves_spark_metrics_to_prometheus_from_the_driver():
    spec = documents("spark-application.yaml")[0]["spec"]
    conf = spec["sparkConf"]
    sink = "spark.metrics.conf.*.sink.prometheusServlet"
    assert conf[f"{sink}.class"] == "org.apache.spark.metrics.sink.PrometheusServlet"
    assert conf["spark.sql.streaming.metricsEnabled"] == "true"
    assert conf["spark.ui.prometheus.enabled"] == "true"
    # Series named after the app, not its id (new on every restart)
    assert conf["spark.metrics.namespace"] == "${spark.app.name}"
    annotations = spec["driver"]["annotations"]
    assert annotations == {"prometheus.io/scrape": "true", "prometheus.io/port": "4040",
                           "prometheus.io/path": conf[f"{sink}.path"]}


def test_the_spark_operator_controller_may_manage_network_policies_in_the_job_namespace_and_nothing_else():
    rbac = by_kind("spark-operator-rbac.yaml")
    assert rbac["Role"]["rules"] == [{"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"],
                                      "verbs": ["get", "create", "patch", "delete"]}]
    binding = rbac["RoleBinding"]
    assert binding["roleRef"]["name"] == rbac["Role"]["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "spark-operator-controller",
                                    "namespace": "spark-operator"}]


def dry_submit(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "KRAFTY_SUBMIT_DRY_RUN": "1", "TMPDIR": str(tmp_path), **env}
    return subprocess.run([str(SPARK_DIR / "submit.sh"), *args], capture_output=True, text=True, env=environment,
                          timeout=60, check=False)


def test_submit_script_renders_templates_for_the_cluster_and_submits_in_cluster_mode(tmp_path):
    # Given a KafkaCluster "small" and a job named clicks
    result = dry_submit(tmp_path, KUBE_API="https://10.0.0.1:6443", NAMESPACE="apps", KAFKA_CLUSTER="small",
                        JOB_NAME="clicks")
    assert result.returncode == 0, result.stderr
    templates = Path(re.search(r"# pod templates: (\S+)", result.stdout).group(1))
    command = shlex.split(result.stdout.splitlines()[-1])
    # Then spark-submit targets the API server in cluster mode with the image, the ServiceAccount and the templates
    conf = dict(command[i + 1].split("=", 1) for i, arg in enumerate(command) if arg == "--conf")
    assert command[command.index("--master") + 1] == "k8s://https://10.0.0.1:6443"
    assert command[command.index("--deploy-mode") + 1] == "cluster"
    assert conf["spark.kubernetes.namespace"] == "apps"
    assert conf["spark.kubernetes.container.image"] == "krafty-spark:4.2.0"
    assert conf["spark.kubernetes.authenticate.driver.serviceAccountName"] == "krafty-spark"
    # And both pod templates mount small's connection ConfigMap, labelled for the job
    for role in ("driver", "executor"):
        assert conf[f"spark.kubernetes.{role}.podTemplateFile"] == str(templates / f"{role}.yaml")
        pod = yaml.safe_load((templates / f"{role}.yaml").read_text())
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        assert volumes["kafka-connection"]["configMap"]["name"] == "small-kafka-connection"
        assert volumes["kafka-ca"]["secret"]["secretName"] == "small-cluster-ca-cert"
        assert pod["metadata"]["labels"]["spark.krafty.io/job"] == "clicks"
        assert volumes["kafka-user"]["secret"]["secretName"] == "clicks"  # (KAFKA_USER unset: the job's name)
    assert conf["spark.redaction.regex"].endswith("|jaas|keystore")
    affinity = yaml.safe_load((templates / "executor.yaml").read_text())["spec"]["affinity"]
    assert affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["labelSelector"][
        "matchLabels"]["spark.krafty.io/job"] == "clicks"
    # And the job's default arguments are valid options
    main = command.index("local:///opt/krafty/jobs/pageviews.py")
    options = parse_args(command[main + 1:], mounted=MOUNTED)
    assert (options.job_name, options.lag_group) == ("clicks", "spark-clicks")


def test_submit_script_passes_given_job_options_and_needs_an_https_api_server(tmp_path):
    result = dry_submit(tmp_path, "--input-topics", "x", "--output-topic", "y", "--checkpoint", "/data/c",
                        KUBE_API="https://api:6443", NAMESPACE="apps")
    command = shlex.split(result.stdout.splitlines()[-1])
    assert command[-6:] == ["--input-topics", "x", "--output-topic", "y", "--checkpoint", "/data/c"]
    # And KAFKA_USER names the KafkaUser whose Secret both pods mount
    named = dry_submit(tmp_path, KUBE_API="https://api:6443", NAMESPACE="apps", KAFKA_USER="spark-views")
    templates = Path(re.search(r"# pod templates: (\S+)", named.stdout).group(1))
    for role in ("driver", "executor"):
        volumes = {v["name"]: v for v in yaml.safe_load((templates / f"{role}.yaml").read_text())["spec"]["volumes"]}
        assert volumes["kafka-user"]["secret"] == {"secretName": "spark-views", "optional": True}
    refused = dry_submit(tmp_path, KUBE_API="http://api:8080", NAMESPACE="apps")
    assert refused.returncode == 2
    assert "no API server URL" in refused.stderr


def entrypoint(*args: str, dry_run: bool = True, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "SPARK_HOME": str(Path(pyspark.__file__).parent), **env}
    if dry_run:
        environment["KRAFTY_ENTRYPOINT_DRY_RUN"] = "1"
    return subprocess.run([str(ENTRYPOINT), *args], capture_output=True, text=True, env=environment, timeout=120,
                          check=False)


def test_entrypoint_starts_executors_as_spark_on_kubernetes_describes_them():
    # Given the environment Spark gives an executor pod
    result = entrypoint("executor", JAVA_HOME="/usr/lib/jvm/java-17", SPARK_CONF_DIR="/opt/spark/conf",
                        SPARK_EXECUTOR_MEMORY="1024m", SPARK_DRIVER_URL="spark://CoarseGrainedScheduler@d:7078",
                        SPARK_EXECUTOR_ID="3", SPARK_EXECUTOR_CORES="1", SPARK_APPLICATION_ID="spark-a1",
                        SPARK_EXECUTOR_POD_IP="10.1.2.3", SPARK_RESOURCE_PROFILE_ID="0",
                        SPARK_EXECUTOR_POD_NAME="pageviews-exec-3", SPARK_JAVA_OPT_0="-Dspark.driver.port=7078",
                        SPARK_JAVA_OPT_1="-Dspark.app.name=page views", SPARK_JAVA_OPT_3="-Dnot=contiguous")
    assert result.returncode == 0, result.stderr
    command = result.stdout.split("\n")[:-1]
    command = [shlex.split(line)[0] for line in command]
    # Then it runs the executor backend with the options in order, the heap and every id
    assert command[:5] == ["/usr/lib/jvm/java-17/bin/java", "-Dspark.driver.port=7078",
                           "-Dspark.app.name=page views", "-Xms1024m", "-Xmx1024m"]
    classpath = command[command.index("-cp") + 1]
    assert classpath.startswith("/opt/spark/conf:")
    assert classpath.endswith("/jars/*")
    backend = command.index("org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend")
    assert command[backend + 1:] == ["--driver-url", "spark://CoarseGrainedScheduler@d:7078", "--executor-id", "3",
                                     "--cores", "1", "--app-id", "spark-a1", "--hostname", "10.1.2.3",
                                     "--resourceProfileId", "0", "--podName", "pageviews-exec-3"]


def test_entrypoint_refuses_an_executor_without_its_environment():
    result = entrypoint("executor", JAVA_HOME="/usr/lib/jvm/java-17")
    assert result.returncode != 0
    assert "SPARK_EXECUTOR_MEMORY" in result.stderr


@pytest.mark.timeout(300)
def test_entrypoint_runs_the_driver_through_spark_submit_to_the_job(tmp_path):
    # Given the arguments Spark gives a Python driver pod, with a local master instead of Kubernetes
    properties = tmp_path / "spark.properties"
    properties.write_text("spark.master=local[1]\nspark.ui.enabled=false\n")
    shim = tmp_path / "tini"
    shim.write_text('#!/bin/sh\n# stands in for tini: drop "-s --"\nshift 2\nexec "$@"\n')
    shim.chmod(0o755)
    # When the entrypoint runs in driver mode (the job is asked for --help)
    result = entrypoint("driver", "--properties-file", str(properties), "--class",
                        "org.apache.spark.deploy.PythonRunner", str(SPARK_DIR / "jobs" / "pageviews.py"), "--help",
                        dry_run=False, KRAFTY_TINI=str(shim), SPARK_DRIVER_BIND_ADDRESS="127.0.0.1",
                        PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    # Then spark-submit started the Python job, which printed its options
    assert result.returncode == 0, result.stderr[-3000:]
    assert "usage: krafty_spark" in result.stdout
    assert "--connection-dir" in result.stdout


def test_dockerfile_builds_from_debian_as_non_root_with_every_copied_file_in_its_context():
    dockerfile = (SPARK_DIR / "Dockerfile").read_text()
    assert re.findall(r"^FROM (\S+)", dockerfile, flags=re.MULTILINE) == ["debian:bookworm-slim"] * 2
    assert re.findall(r"^USER (\S+)", dockerfile, flags=re.MULTILINE) == ["185"]
    assert 'ENTRYPOINT ["/opt/krafty/entrypoint.sh"]' in dockerfile
    assert "openjdk-17-jre-headless python3" in dockerfile
    allowed = [line[1:].rstrip("/") for line in (SPARK_DIR / "Dockerfile.dockerignore").read_text().splitlines()
               if line.startswith("!")]
    sources = [src for line in re.findall(r"^COPY (?!--from)(.+)$", dockerfile, flags=re.MULTILINE)
               for src in line.split()[:-1]]
    assert sources
    repo = SPARK_DIR.parent
    for source in sources:
        assert (repo / source).exists(), source
        assert any(source == a or source.startswith(a + "/") for a in allowed), f"{source} not in the build context"
