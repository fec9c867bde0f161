#!/usr/bin/env bash
# Entrypoint of the krafty Spark image, for Spark on Kubernetes.
#
# Spark creates the pods and tells the container what to be through its
# arguments and environment:
#   driver ARGS...    spark-submit in client mode inside the driver pod; ARGS
#                     are "--properties-file <conf> --class <main> <app> ...".
#                     The pod's IP arrives as SPARK_DRIVER_BIND_ADDRESS.
#   executor          a KubernetesExecutorBackend JVM; everything it needs
#                     arrives as SPARK_* variables (driver URL, ids, cores,
#                     memory, pod IP and name) and JVM options as
#                     SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ...
#   anything else     run as given (e.g. a shell, or spark-submit itself).
# tini runs the command as a subreaper, so PySpark's worker processes are
# reaped and signals reach the JVM. KRAFTY_ENTRYPOINT_DRY_RUN=1 prints the
# command instead of running it.
set -euo pipefail

: "${SPARK_HOME:?SPARK_HOME must point at the Spark installation}"

executor_classpath() {
  local cp="${SPARK_CONF_DIR:-$SPARK_HOME/conf}:$SPARK_HOME/jars/*"
  [[ -n "${SPARK_CLASSPATH:-}" ]] && cp+=":$SPARK_CLASSPATH"
  [[ -n "${SPARK_EXTRA_CLASSPATH:-}" ]] && cp+=":$SPARK_EXTRA_CLASSPATH"
  printf '%s' "$cp"
}

# Spark numbers the executor's JVM options from 0 without gaps.
executor_java_opts=()
for ((i = 0; ; i++)); do
  name="SPARK_JAVA_OPT_$i"
  [[ -v "$name" ]] || break
  executor_java_opts+=("${!name}")
done

# A user name for the container's uid: Hadoop's login code needs one even
# when the image runs under an arbitrary uid without a passwd entry.
if ! id -un >/dev/null 2>&1; then
  export HADOOP_USER_NAME="${HADOOP_USER_NAME:-${SPARK_USER:-spark}}"
fi

case "${1:-}" in
  driver)
    shift
    command=("$SPARK_HOME/bin/spark-submit"
      --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS:?set by Spark to the driver pod IP}"
      --deploy-mode client "$@")
    ;;
  executor)
    shift
    command=("${JAVA_HOME:?}/bin/java" "${executor_java_opts[@]}"
      "-Xms${SPARK_EXECUTOR_MEMORY:?}" "-Xmx${SPARK_EXECUTOR_MEMORY}"
      -cp "$(executor_classpath)"
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend
      --driver-url "${SPARK_DRIVER_URL:?}" --executor-id "${SPARK_EXECUTOR_ID:?}"
      --cores "${SPARK_EXECUTOR_CORES:?}" --app-id "${SPARK_APPLICATION_ID:?}"
      --hostname "${SPARK_EXECUTOR_POD_IP:?}" --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}"
      --podName "${SPARK_EXECUTOR_POD_NAME:?}" "$@")
    ;;
  "")
    echo "usage: entrypoint.sh driver ARGS... | executor | COMMAND..." >&2
    exit 2
    ;;
  *)
    command=("$@")
    ;;
esac

if [[ -n "${KRAFTY_ENTRYPOINT_DRY_RUN:-}" ]]; then
  printf '%q\n' "${command[@]}"
  exit 0
fi
exec "${KRAFTY_TINI:-/usr/bin/tini}" -s -- "${command[@]}"
