#!/usr/bin/env bash
# Installs (once) checkov, the Kubernetes manifest scanner the chart tests run, into its own cached venv
# (its many pinned dependencies stay out of the project's). Prints the path of the checkov command.
# pip's own configuration chooses the package index.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
version=3.3.30
venv="$KRAFTY_CACHE/checkov/$version"
if [[ ! -f "$venv/.complete" ]]; then
  log "installing checkov $version into $venv (first time only, about two minutes)"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "checkov==$version" >&2
  touch "$venv/.complete"
fi
echo "$venv/bin/checkov"
