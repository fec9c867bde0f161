#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
# kube-proxy, kubectl and kubeadm (kind's node image) from the k8s.io/kubernetes module at K8S_VERSION.
#
# The module zip has no staging/ tree, so its `replace k8s.io/x =>
# ./staging/src/k8s.io/x` lines are rewritten to the published k8s.io/x
# modules of the matching v0.<minor>.<patch> version before building.
# Output: $KRAFTY_CACHE/k8s/<version>/bin. Reruns are no-ops.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/versions.env"
source "$here/progress.sh"
cache="${KRAFTY_CACHE:-$HOME/.cache/krafty}"
out="$cache/k8s/$K8S_VERSION/bin"
components=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl kubeadm)

have_all() { for c in "${components[@]}"; do [[ -x "$out/$c" ]] || return 1; done; }
if have_all; then exit 0; fi
# One build at a time (the cluster and the API-server tests may both ask at once): the second waits, then finds
# what the first built
mkdir -p "$cache/k8s"
exec 9>"$cache/k8s/.build.lock"
flock 9
if have_all; then exit 0; fi

staging_version="v0.${K8S_VERSION#v1.}"
src="$cache/k8s/$K8S_VERSION/src"
if [[ ! -f "$src/.prepared" ]]; then
  echo "localkube: fetching k8s.io/kubernetes@$K8S_VERSION through $(go env GOPROXY)"
  moddir="$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION" \
    | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(d["Error"]) if "Error" in d else print(d["Dir"])')"
  rm -rf "$src" && mkdir -p "$(dirname "$src")"
  cp -r "$moddir" "$src" && chmod -R u+w "$src"
  # The sample-* staging modules are never published; nothing built here needs them.
  sed -i -E '/k8s\.io\/sample-[a-z-]+ /d' "$src/go.mod"
  sed -i -E "s#^(\s*)(k8s\.io/[a-z0-9-]+) => \./staging/src/k8s\.io/[a-z0-9-]+#\1\2 => \2 $staging_version#" "$src/go.mod"
  touch "$src/.prepared"
fi

commit="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["Origin"]["Hash"])' \
  "$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$K8S_VERSION.info" 2>/dev/null || echo unknown)"
minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitCommit=$commit -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

mkdir -p "$out"
cd "$src"
for c in "${components[@]}"; do
  [[ -x "$out/$c" ]] && continue
  echo "localkube: building $c $K8S_VERSION (first time only)"
  progress "building $c" env GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 \
    go build -trimpath -ldflags "-s -w $ldflags" -o "$out/$c.tmp" "./cmd/$c"
  mv "$out/$c.tmp" "$out/$c"
done
