#!/usr/bin/env bash
# Installs the Debian packages the tests use (through the machine's own apt
# configuration): etcd for API-server tests, Prometheus for metrics tests,
# openssl, dnsmasq and iproute2 for the tests that resolve names through a real
# DNS server in a network namespace of their own (krafty_testkit.resolver).
# Skips apt entirely when everything is present. (Their services are not
# started: there is no init system here, and tests run their own.)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
packages=(etcd-server prometheus openssl dnsmasq-base iproute2)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if (( ${#missing[@]} )); then
  log "installing Debian packages: ${missing[*]}"
  [[ $EUID -eq 0 ]] || die "installing ${missing[*]} needs root"
  apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
fi
