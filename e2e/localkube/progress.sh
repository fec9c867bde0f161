# Sourced by the build scripts: `progress WHAT COMMAND...` runs COMMAND (a first build: it runs only on a cache
# miss) and, while it runs, says every 15 s what is still being done and for how long (a first build takes
# minutes per program on two cores); its time is noted where $KRAFTY_RUN_BUILDS says (the Makefile sets it), so
# that the e2e tier's time budget leaves it out.
progress() {
  local what="$1" began=$SECONDS pid rc=0
  shift
  "$@" &
  pid=$!
  while ! wait_for_exit "$pid" 15; do
    echo "localkube: $what: $((SECONDS - began)) s so far" >&2
  done
  wait "$pid" || rc=$?
  [[ -z "${KRAFTY_RUN_BUILDS:-}" ]] || echo "$((SECONDS - began)) $what" >> "$KRAFTY_RUN_BUILDS"
  return "$rc"
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
