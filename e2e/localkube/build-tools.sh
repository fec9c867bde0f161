#!/usr/bin/env bash
# Builds the programs the local cluster runs besides Kubernetes itself, from
# source, at the versions pinned in versions.env:
#   coredns, local-path-provisioner, helm, kind,  Go modules through the Go
#   crictl                                        module proxy (`go env GOPROXY`)
#   etcd                                          the same, its server module built from a throwaway module
#   kube-router                                   the same, from k3s's fork (versions.env)
#   csi-provisioner, csi-resizer                  the same, each in a copy of its own module
#   spark-operator                                the Kubeflow Spark operator the same way, and the Helm
#                                                 chart its module holds (only when asked for: Spark e2e)
#   metallb                                       MetalLB's controller and speaker, each in a copy of its
#                                                 module, and the native manifest it holds
#   csi-loop                                      our CSI driver, from csi-loop/ in this tree
#   pause                                         the sandbox process, from the
#                                                 pause.c of the k8s.io/kubernetes
#                                                 module (static, gcc)
# Usage: build-tools.sh [TOOL...]   (default: everything `localkube up` needs;
#                                    spark-operator only when asked for)
# Output: $KRAFTY_CACHE/localkube/tools/<tool>-<version>/<tool>, linked from
# $KRAFTY_CACHE/localkube/bin/<tool>. Reruns are no-ops.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/versions.env"
source "$here/progress.sh"
cache="${KRAFTY_CACHE:-$HOME/.cache/krafty}"
tools="$cache/localkube/tools"
bin="$cache/localkube/bin"
mkdir -p "$tools" "$bin"

say() { echo "localkube: $*" >&2; }

# go_tool NAME VERSION PACKAGE [LDFLAGS]: `go install PACKAGE@VERSION` into the cache.
go_tool() {
  local name="$1" version="$2" package="$3" ldflags="${4:-}" dir="$tools/$1-$2"
  if [[ ! -x "$dir/$name" ]]; then
    say "building $name $version from source through $(go env GOPROXY) (first time only)"
    mkdir -p "$dir"
    (cd /tmp && progress "building $name" env GOBIN="$dir/.partial" GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 \
      go install -trimpath -ldflags "-s -w $ldflags" "$package@$version")
    mv "$dir/.partial/$(basename "$package")" "$dir/$name"
    rm -rf "$dir/.partial"
  fi
  ln -sfn "$dir/$name" "$bin/$name"
}

# kube-router: a throwaway module whose go.mod replaces the upstream path with the fork (the fork's go.mod
# keeps the upstream name, so `go install fork@version` is refused). The fork is not in the checksum
# database: go.sum then records the hashes of what was downloaded.
kube_router_tool() {
  local dir="$tools/kube-router-$KUBE_ROUTER_VERSION" upstream=github.com/cloudnativelabs/kube-router/v2
  if [[ ! -x "$dir/kube-router" ]]; then
    say "building kube-router $KUBE_ROUTER_VERSION ($KUBE_ROUTER_FORK) through $(go env GOPROXY) (first time only)"
    rm -rf "$dir/.src" && mkdir -p "$dir/.src"
    printf 'module localkube/kube-router\n\ngo 1.23\n\nrequire %s %s\n\nreplace %s => %s %s\n' \
      "$upstream" "$KUBE_ROUTER_VERSION" "$upstream" "${KUBE_ROUTER_FORK%@*}" "${KUBE_ROUTER_FORK#*@}" \
      >"$dir/.src/go.mod"
    (cd "$dir/.src" && progress "building kube-router" \
      env GOWORK=off GOFLAGS=-mod=mod GONOSUMDB="${KUBE_ROUTER_FORK%%/v2@*}" CGO_ENABLED=0 \
      go build -trimpath -o ../kube-router.partial \
        -ldflags "-s -w -X $upstream/pkg/version.Version=$KUBE_ROUTER_VERSION-${KUBE_ROUTER_FORK#*@}" \
        "$upstream/cmd/kube-router")
    mv "$dir/kube-router.partial" "$dir/kube-router"
    rm -rf "$dir/.src"
  fi
  ln -sfn "$dir/kube-router" "$bin/kube-router"
}

# etcd: the server module's go.mod replaces its sibling modules with folders the module zip does not hold, so it
# is built as a dependency of a throwaway module (whose build ignores those replace lines, taking the siblings at
# the versions it requires).
etcd_tool() {
  local dir="$tools/etcd-$ETCD_VERSION" module=go.etcd.io/etcd/server/v3
  if [[ ! -x "$dir/etcd" ]]; then
    say "building etcd $ETCD_VERSION from source through $(go env GOPROXY) (first time only)"
    rm -rf "$dir/.src" && mkdir -p "$dir/.src"
    printf 'module localkube/etcd\n\ngo 1.24\n\nrequire %s %s\n' "$module" "$ETCD_VERSION" >"$dir/.src/go.mod"
    (cd "$dir/.src" && progress "building etcd" env GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 \
      go build -trimpath -ldflags "-s -w" -o ../etcd.partial "$module")
    mv "$dir/etcd.partial" "$dir/etcd"
    rm -rf "$dir/.src"
  fi
  ln -sfn "$dir/etcd" "$bin/etcd"
}

# The CSI sidecars: their go.mod pins the Kubernetes modules with replace lines, which `go install
# module@version` refuses, so each is built inside a copy of its own module (with its own go.sum).
csi_sidecar_tool() {
  local name="$1" version="$2" module="$3" dir="$tools/$1-$2" moddir
  if [[ ! -x "$dir/$name" ]]; then
    say "building $name $version from source through $(go env GOPROXY) (first time only)"
    moddir="$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "$module@$version" \
      | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(d["Error"]) if "Error" in d else print(d["Dir"])')"
    rm -rf "$dir/.src" && mkdir -p "$dir"
    cp -r "$moddir" "$dir/.src" && chmod -R u+w "$dir/.src"
    (cd "$dir/.src" && progress "building $name" env GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false" \
      CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$version" -o "../$name.partial" "./cmd/$name")
    mv "$dir/$name.partial" "$dir/$name"
    rm -rf "$dir/.src"
  fi
  ln -sfn "$dir/$name" "$bin/$name"
}

# The Kubeflow Spark operator: its go.mod pins the Kubernetes modules with replace lines (to published
# versions), which `go install module@version` refuses, so it is built inside a copy of its module, like the
# CSI sidecars. The module zip also holds its Helm chart (charts/spark-operator-chart, CRDs included): copied
# next to the binary, so the folder is both what the chart is installed from and the build context of its
# image (e2e/images/spark-operator/Dockerfile).
spark_operator_tool() {
  local version="$SPARK_OPERATOR_VERSION" module=github.com/kubeflow/spark-operator/v2
  local dir="$tools/spark-operator-$version" found moddir commit
  if [[ ! -x "$dir/spark-operator" || ! -f "$dir/chart/Chart.yaml" ]]; then
    say "building spark-operator $version from source through $(go env GOPROXY) (first time only, minutes)"
    # (the module's folder, and the commit its tag named, which the proxy records as its origin)
    found="$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "$module@$version" | python3 -c 'import json, sys
d = json.load(sys.stdin)
sys.exit(d["Error"]) if "Error" in d else print(d["Dir"], d.get("Origin", {}).get("Hash", ""))')"
    read -r moddir commit <<<"$found"
    rm -rf "$dir" && mkdir -p "$dir"
    cp -r "$moddir" "$dir/.src" && chmod -R u+w "$dir/.src"
    (cd "$dir/.src" && progress "building spark-operator" env GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false" \
      CGO_ENABLED=0 go build -trimpath -o ../spark-operator.partial -ldflags "-s -w -X $module.version=$version \
        -X $module.gitTag=$version -X $module.gitCommit=$commit -X $module.gitTreeState=clean" ./cmd/operator)
    cp -r "$dir/.src/charts/spark-operator-chart" "$dir/chart"
    mv "$dir/spark-operator.partial" "$dir/spark-operator"
    rm -rf "$dir/.src"
    say "spark-operator $version: binary and chart in $dir"
  fi
  ln -sfn "$dir/spark-operator" "$bin/spark-operator"
}

# MetalLB: its controller and speaker, built inside a copy of its module (like the CSI sidecars), and the
# native manifest the module holds (config/manifests/metallb-native.yaml) kept next to them.
metallb_tool() {
  local version="$METALLB_VERSION" module=go.universe.tf/metallb dir="$tools/metallb-$METALLB_VERSION" moddir
  if [[ ! -x "$dir/controller" || ! -x "$dir/speaker" || ! -f "$dir/metallb-native.yaml" ]]; then
    say "building metallb $version (controller, speaker) from source through $(go env GOPROXY) (first time only)"
    moddir="$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "$module@$version" \
      | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(d["Error"]) if "Error" in d else print(d["Dir"])')"
    rm -rf "$dir" && mkdir -p "$dir"
    cp -r "$moddir" "$dir/.src" && chmod -R u+w "$dir/.src"
    for program in controller speaker; do
      (cd "$dir/.src" && progress "building metallb $program" env GOWORK=off GOTOOLCHAIN=local \
        GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" \
        -o "../$program.partial" "./$program")
      mv "$dir/$program.partial" "$dir/$program"
    done
    cp "$dir/.src/config/manifests/metallb-native.yaml" "$dir/metallb-native.yaml"
    rm -rf "$dir/.src"
  fi
  ln -sfn "$dir/controller" "$bin/metallb-controller"
  ln -sfn "$dir/speaker" "$bin/metallb-speaker"
}

# csi-loop comes from this tree: its folder is named by a hash of the sources, so an edited driver is
# rebuilt (and the build it replaces removed) and an unchanged one costs nothing.
csi_loop_tool() {
  local src="$here/csi-loop" hash dir
  hash="$(cat "$src/go.mod" "$src/go.sum" "$src"/*.go | sha256sum | cut -c1-12)"
  dir="$tools/csi-loop-$hash"
  if [[ ! -x "$dir/csi-loop" ]]; then
    say "building csi-loop from $src (first time only, and after each change)"
    mkdir -p "$dir"
    (cd "$src" && progress "building csi-loop" env GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false" \
      CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$dir/csi-loop.partial" .)
    mv "$dir/csi-loop.partial" "$dir/csi-loop"
    find "$tools" -maxdepth 1 -name 'csi-loop-*' ! -name "csi-loop-$hash" -exec rm -rf {} +
  fi
  ln -sfn "$dir/csi-loop" "$bin/csi-loop"
}

# The pause program comes with the Kubernetes sources build-k8s.sh already holds.
pause_tool() {
  local dir="$tools/pause-$PAUSE_VERSION"
  if [[ ! -x "$dir/pause" ]]; then
    "$here/build-k8s.sh"
    say "compiling pause $PAUSE_VERSION (first time only)"
    mkdir -p "$dir"
    gcc -Os -Wall -Werror -static -DVERSION="v$PAUSE_VERSION-krafty" \
      -o "$dir/pause.partial" "$cache/k8s/$K8S_VERSION/src/build/pause/linux/pause.c"
    strip "$dir/pause.partial" && mv "$dir/pause.partial" "$dir/pause"
  fi
  ln -sfn "$dir/pause" "$bin/pause"
}

build() {
  case "$1" in
    coredns) go_tool coredns "$COREDNS_VERSION" github.com/coredns/coredns \
      "-X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION" ;;
    local-path-provisioner) go_tool local-path-provisioner "$LOCAL_PATH_PROVISIONER_VERSION" \
      github.com/rancher/local-path-provisioner ;;
    helm) go_tool helm "$HELM_VERSION" helm.sh/helm/v3/cmd/helm \
      "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean" ;;
    kind) go_tool kind "$KIND_VERSION" sigs.k8s.io/kind ;;
    crictl) go_tool crictl "$CRICTL_VERSION" sigs.k8s.io/cri-tools/cmd/crictl \
      "-X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION" ;;
    etcd) etcd_tool ;;
    spark-operator) spark_operator_tool ;;
    kube-router) kube_router_tool ;;
    csi-provisioner) csi_sidecar_tool csi-provisioner "$CSI_PROVISIONER_VERSION" \
      github.com/kubernetes-csi/external-provisioner/v5 ;;
    csi-resizer) csi_sidecar_tool csi-resizer "$CSI_RESIZER_VERSION" github.com/kubernetes-csi/external-resizer ;;
    csi-loop) csi_loop_tool ;;
    metallb) metallb_tool ;;
    pause) pause_tool ;;
    kubectl) kubectl_link ;;
    *) say "unknown tool: $1"; exit 2 ;;
  esac
}

# kubectl sits next to helm, so one folder (`localkube tools-path`) holds the clients.
kubectl_link() {
  "$here/build-k8s.sh"
  ln -sfn "$cache/k8s/$K8S_VERSION/bin/kubectl" "$bin/kubectl"
}

if [[ $# -eq 0 ]]; then
  set -- kubectl kind etcd crictl pause coredns local-path-provisioner kube-router helm csi-loop csi-provisioner \
    csi-resizer metallb
fi
for tool in "$@"; do build "$tool"; done
