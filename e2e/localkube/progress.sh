# Sourced by the build scripts: `progress WHAT COMMAND...` runs COMMAND and, while it runs, says every 15 s
# what is still being done and for how long (a first build takes minutes per program on two cores).
progress() {
  local what="$1" began=$SECONDS pid
  shift
  "$@" &
  pid=$!
  while ! wait_for_exit "$pid" 15; do
    echo "localkube: $what: $((SECONDS - began)) s so far" >&2
  done
  wait "$pid"
}

# wait_for_exit PID SECONDS: true once PID has exited, false if it still runs after SECONDS.
wait_for_exit() {
  local pid="$1" deadline=$((SECONDS + $2))
  while kill -0 "$pid" 2>/dev/null; do
    ((SECONDS >= deadline)) && return 1
    sleep 1
  done
  return 0
}
