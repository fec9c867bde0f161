"""MetalLB, which gives LoadBalancer Services an address: its native manifest (from its module, kept by
build-tools.sh next to its programs) with the images built here, and a layer-2 pool of addresses on the nodes'
network, which the host is on too: a speaker answers ARP for each address the controller hands out, from the
node it runs on, and kube-proxy there takes the traffic to the Service's pods.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

from . import settings as s
from .settings import Settings

NAMESPACE = "metallb-system"
POOL = "krafty-kind"
POOL_SIZE = 50  # addresses at the top of the nodes' subnet, whose lower half alone the nodes get (node_range)


def manifest(cfg: Settings) -> str:
    """MetalLB's native manifest, its two images replaced by the ones the nodes preload."""
    version = cfg.versions["METALLB_VERSION"]
    text = (cfg.tool("metallb-controller").parent / "metallb-native.yaml").read_text()
    for program in ("controller", "speaker"):
        upstream = f"        image: quay.io/metallb/{program}:{version}\n"
        if upstream not in text:
            raise RuntimeError(f"MetalLB's manifest does not name {upstream.strip()}")
        text = text.replace(upstream, f"        image: {s.kind_image(f'metallb-{program}', version)}\n"
                                      f"        command: [/usr/local/bin/{program}]\n")
    return text


def address_range(subnet: str) -> tuple[str, str]:
    """The pool: the last POOL_SIZE usable addresses of the nodes' (IPv4) subnet."""
    network = ipaddress.ip_network(subnet)
    if network.version != 4 or network.num_addresses < 4 * POOL_SIZE:
        raise RuntimeError(f"the nodes' network {subnet} has no room for {POOL_SIZE} load-balancer addresses")
    last = network.broadcast_address - 1
    return str(last - (POOL_SIZE - 1)), str(last)


def node_range(subnet: str) -> str:
    """Where the container engine gives the nodes their addresses: the subnet's lower half, so that a node that
    starts again with another address never takes one of the pool's (the engine knows nothing of MetalLB's)."""
    network = ipaddress.ip_network(subnet)
    return str(next(network.subnets(prefixlen_diff=1)))


def pool(first: str, last: str) -> list[dict[str, Any]]:
    return [
        {"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
         "metadata": {"name": POOL, "namespace": NAMESPACE}, "spec": {"addresses": [f"{first}-{last}"]}},
        {"apiVersion": "metallb.io/v1beta1", "kind": "L2Advertisement",
         "metadata": {"name": POOL, "namespace": NAMESPACE}, "spec": {"ipAddressPools": [POOL]}},
    ]


def pool_manifest(subnet: str) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": pool(*address_range(subnet))})
