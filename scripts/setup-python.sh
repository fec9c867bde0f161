#!/usr/bin/env bash
# Creates (once) the Python venv the tests and tools use, keyed by the lock
# files, under $KRAFTY_CACHE/venv/<hash>. Prints the venv path. The project's
# own packages are not installed into it: scripts/env.sh puts their src/
# folders on PYTHONPATH, so any checkout can share the venv. pip's own
# configuration chooses the package index.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$KRAFTY_ROOT"
key="$(files_hash requirements-dev.txt operator/requirements.txt)"
venv="$KRAFTY_CACHE/venv/$key"
if [[ ! -f "$venv/.complete" ]]; then
  log "creating Python venv $venv (first time only)"
  began=$SECONDS
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --progress-bar off -r requirements-dev.txt >&2  # (a line per package: minutes of silence otherwise)
  touch "$venv/.complete"
  note_first_build "$((SECONDS - began))" "the Python venv"
fi
echo "$venv"
