#!/usr/bin/env bash
# Submits the page-view job to Kubernetes: spark-submit in cluster mode, the
# driver and executors in pods from the krafty Spark image (spark/Dockerfile).
#
#   spark/submit.sh [JOB OPTIONS...]      (default options: see job_args below)
#
# Before the first run, in the job's namespace:
#   kubectl apply -n "$NAMESPACE" -f spark/k8s/rbac.yaml -f spark/k8s/pvc.yaml
# and the KafkaCluster "$KAFKA_CLUSTER" must exist there: the operator
# publishes its "$KAFKA_CLUSTER-kafka-connection" ConfigMap, which the pod
# templates mount at /etc/krafty/kafka-connection, where the job reads it, and
# its CA certificates, "$KAFKA_CLUSTER-cluster-ca-cert", mounted at
# /etc/krafty/kafka-ca (what the job trusts when the first listener is TLS).
#
# Environment (all optional):
#   KUBE_API        API server URL (default: the current kubectl context's)
#   NAMESPACE       default: the current kubectl context's namespace, else "default"
#   IMAGE           default krafty-spark:$SPARK_VERSION
#   KAFKA_CLUSTER   default prod
#   JOB_NAME        default pageviews (Spark app name, query name, lag group spark-$JOB_NAME)
#   KAFKA_USER      the KafkaUser the job runs as, when it exists (default: $JOB_NAME): its Secret is
#                   mounted at /etc/krafty/kafka-user, and the job reaches the listener it names with it
#   EXECUTORS       default 1
#   CPU_REQUEST     CPU the driver and each executor pod request (default 250m; Spark's own
#                   default would be a whole core per pod)
#   SPARK_SUBMIT    default: spark-submit on PATH (PySpark's, e.g. after `source scripts/env.sh`)
#   KRAFTY_SUBMIT_DRY_RUN=1   print the command and keep the rendered pod templates, submit nothing
# spark-submit authenticates with the current kubeconfig; the driver then uses
# the krafty-spark ServiceAccount (spark/k8s/rbac.yaml).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/spark.env"

kafka_cluster="${KAFKA_CLUSTER:-prod}"
job_name="${JOB_NAME:-pageviews}"
kafka_user="${KAFKA_USER:-$job_name}"
image="${IMAGE:-krafty-spark:$SPARK_VERSION}"
api="${KUBE_API:-$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')}"
namespace="${NAMESPACE:-$(kubectl config view --minify -o jsonpath='{..namespace}' 2>/dev/null || true)}"
namespace="${namespace:-default}"
spark_submit="${SPARK_SUBMIT:-spark-submit}"
[[ "$api" == https://* ]] || { echo "submit.sh: no API server URL (set KUBE_API or a kubectl context)" >&2; exit 2; }

job_args=("$@")
if [[ ${#job_args[@]} -eq 0 ]]; then
  job_args=(--job-name "$job_name" --input-topics page-views
    --output-path "/data/$job_name/output" --checkpoint "/data/$job_name/checkpoint"
    --trigger 30s --window 1m --watermark 2m)
fi

# The templates name the KafkaCluster "prod" and the job "pageviews"; render them for this submission.
templates="$(mktemp -d)"
if [[ -z "${KRAFTY_SUBMIT_DRY_RUN:-}" ]]; then trap 'rm -rf "$templates"' EXIT; fi
for role in driver executor; do
  sed -e "s/name: prod-kafka-connection/name: $kafka_cluster-kafka-connection/" \
      -e "s/secretName: prod-cluster-ca-cert/secretName: $kafka_cluster-cluster-ca-cert/" \
      -e "s|spark.krafty.io/job: pageviews|spark.krafty.io/job: $job_name|" \
      -e "s/secretName: pageviews\$/secretName: $kafka_user/" \
      "$here/k8s/$role-pod-template.yaml" > "$templates/$role.yaml"
done

# (spark.redaction.regex: the KafkaUser's password and key are options of the Kafka source, kept out of
# logs and the UI)
command=("$spark_submit"
  --master "k8s://$api" --deploy-mode cluster --name "$job_name"
  --conf "spark.kubernetes.namespace=$namespace"
  --conf "spark.kubernetes.container.image=$image"
  --conf spark.kubernetes.container.image.pullPolicy=IfNotPresent
  --conf spark.kubernetes.authenticate.driver.serviceAccountName=krafty-spark
  --conf "spark.kubernetes.driver.podTemplateFile=$templates/driver.yaml"
  --conf "spark.kubernetes.executor.podTemplateFile=$templates/executor.yaml"
  --conf spark.kubernetes.driver.podTemplateContainerName=spark-kubernetes-driver
  --conf spark.kubernetes.executor.podTemplateContainerName=spark-kubernetes-executor
  --conf "spark.executor.instances=${EXECUTORS:-1}"
  --conf spark.driver.cores=1 --conf spark.driver.memory=1g
  --conf spark.executor.cores=1 --conf spark.executor.memory=1g
  --conf "spark.kubernetes.driver.request.cores=${CPU_REQUEST:-250m}"
  --conf "spark.kubernetes.executor.request.cores=${CPU_REQUEST:-250m}"
  --conf spark.sql.shuffle.partitions=4
  --conf "spark.redaction.regex=(?i)secret|password|token|access[.]?key|jaas|keystore"
  --conf spark.kubernetes.submission.waitAppCompletion=false
  local:///opt/krafty/jobs/pageviews.py "${job_args[@]}")

if [[ -n "${KRAFTY_SUBMIT_DRY_RUN:-}" ]]; then
  echo "# pod templates: $templates"
  printf '%q ' "${command[@]}"
  echo
  exit 0
fi
"${command[@]}"
