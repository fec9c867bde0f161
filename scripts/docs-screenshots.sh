#!/usr/bin/env bash
# Screenshots of the built documentation site for the README: its home page and the API reference, taken with
# headless Chromium (Debian's, installed through the machine's own apt configuration when missing).
#   scripts/docs-screenshots.sh SITE_DIR   writes docs/site-home.png and docs/site-api.png
set -euo pipefail
source "$(dirname "$0")/lib.sh"
site="${1:?usage: docs-screenshots.sh SITE_DIR (make docs builds it)}"
[[ -f "$site/index.html" ]] || die "no built site in $site: run make docs"
if ! command -v chromium >/dev/null; then
  log "installing Debian's chromium (headless screenshots)"
  [[ $EUID -eq 0 ]] || die "installing chromium needs root"
  apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core >&2
fi
shoot() {  # PAGE OUT: one page of the site, 1280 px wide
  chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,900 \
    --screenshot="$2" "file://$site/$1" >/dev/null 2>&1
  [[ -s "$2" ]] || die "chromium wrote no screenshot of $1"
  log "$2: $1"
}
shoot index.html "$KRAFTY_ROOT/docs/site-home.png"
shoot reference/api/index.html "$KRAFTY_ROOT/docs/site-api.png"
