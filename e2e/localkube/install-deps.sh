#!/usr/bin/env bash
# Installs the Debian packages the local cluster runs on: the container
# runtime (containerd, runc, CNI plugins), etcd, the image tools (buildah,
# umoci, debootstrap, podman), the networking tools kube-proxy, kube-router and
# the kubelet call, and the disk tools of the csi-loop driver (losetup and
# mount from mount, mkfs.xfs and xfs_growfs from xfsprogs). apt runs only when
# something is missing, and package scripts are told not to start services:
# localkube starts its own.
set -euo pipefail
packages=(containerd runc containernetworking-plugins iptables ipset conntrack socat iproute2
          etcd-server umoci debootstrap buildah podman netavark aardvark-dns openssl gcc libc6-dev util-linux mount
          xfsprogs)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "localkube: installing ${missing[*]} with apt (first time only)" >&2
policy=/usr/sbin/policy-rc.d
if [[ ! -e "$policy" ]]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy"
  trap 'rm -f "$policy"' EXIT
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >&2
apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
