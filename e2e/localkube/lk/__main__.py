"""localkube: a kind cluster of a control plane and N workers in N zones, built from source on this machine
(podman as kind's provider where no Docker engine answers; nothing is pulled from a registry).

  up [--nodes N]          start (or keep) the cluster: a control plane and N workers (default 3), each in its
                          own zone (topology.kubernetes.io/zone zone-a, zone-b, ...); waits until all are Ready
  down                    delete the cluster and leave nothing behind (the cache stays)
  status [--json]         the node containers, the nodes' Ready conditions, what is left behind when down
  load-images SPEC...     build images with buildah and import them into every worker's containerd;
                          SPEC is NAME=DOCKERFILE[:CONTEXT] or @LISTFILE (one SPEC per line)
  node ACTION NODE        stop (every process of the node killed at once, like a power cut), start,
                          partition (its traffic to and from everything dropped) or heal
  kubeconfig              print the admin kubeconfig's path
  tools-path              print the folder holding kubectl, helm and the cluster's other programs
  base-image              make (or keep) the Debian base image in buildah's storage
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from . import base_image, images
from . import cluster as kc
from .settings import Settings


def _specs(args: list[str]) -> list[images.ImageSpec]:
    specs: list[images.ImageSpec] = []
    for arg in args:
        specs += images.parse_list_file(Path(arg[1:])) if arg.startswith("@") else [images.ImageSpec.parse(arg)]
    return specs


def load_images(args: list[str]) -> None:
    cfg = Settings.from_env()
    nodes = {name: kc.ctr(name) for name in kc.schedulable_nodes()}
    if not nodes:
        raise SystemExit("localkube: the cluster is not up (run `localkube up` first)")
    base_image.ensure(cfg)
    for name, image_id, imported in images.load(cfg, _specs(args), nodes):
        where = f"imported into {', '.join(imported)}" if imported else "unchanged"
        print(f"localkube: {name} {image_id[:12]} {where}", flush=True)


def print_status(as_json: bool) -> int:
    state = kc.status()
    if as_json:
        print(json.dumps(state, indent=2))
    else:
        print(f"state: {state['state']} ({state['engine']})\nkubeconfig: {state['kubeconfig']}")
        nodes: dict[str, str] = state["nodes"]  # type: ignore[assignment]
        for name, container in state["containers"].items():  # type: ignore[attr-defined]
            print(f"  {name:<28} container {container:<10} Ready {nodes.get(name, '-')}")
        for kind, items in state["leftovers"].items():  # type: ignore[attr-defined]
            for item in items:
                print(f"  left behind ({kind}): {item}")
    return 0 if state["state"] == "up" else 1


@contextlib.contextmanager
def exclusive(cfg: Settings) -> Iterator[None]:
    """One up/down/load-images/node action at a time on this machine (test sessions may share the cluster)."""
    cfg.cache.mkdir(parents=True, exist_ok=True)
    with open(cfg.cache / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="localkube", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["up", "down", "status", "load-images", "node", "kubeconfig",
                                            "tools-path", "base-image"])
    parser.add_argument("--json", action="store_true", help="status: print JSON")
    parser.add_argument("--nodes", type=int, default=kc.DEFAULT_WORKERS,
                        help=f"up: how many workers, one zone each (default {kc.DEFAULT_WORKERS})")
    parser.add_argument("args", nargs="*", help="load-images: NAME=DOCKERFILE[:CONTEXT] or @LISTFILE; "
                        f"node: ACTION ({', '.join(kc.NODE_ACTIONS)}) NODE")
    args = parser.parse_args(argv)
    cfg = Settings.from_env()
    if args.command == "kubeconfig":
        print(cfg.admin_kubeconfig)
        return 0
    if args.command == "tools-path":
        print(cfg.tools_bin)
        return 0
    if os.geteuid() != 0:
        parser.error("must run as root: it runs privileged node containers and changes the host's network links")
    if not 1 <= args.nodes <= 8:
        parser.error(f"--nodes must be 1 to 8 (workers), not {args.nodes}")
    if args.command == "node" and (len(args.args) != 2 or args.args[0] not in kc.NODE_ACTIONS):
        parser.error(f"node needs ACTION NODE, ACTION one of {', '.join(kc.NODE_ACTIONS)}")
    kc.configure_environment(cfg)
    if args.command == "status":
        return print_status(args.json)
    actions: dict[str, Callable[[], object]] = {
        "up": lambda: kc.up(args.nodes),
        "down": kc.down,
        "load-images": lambda: load_images(args.args),
        "node": lambda: kc.node_fault(args.args[0], args.args[1]),
        "base-image": lambda: print(base_image.ensure(cfg)),
    }
    with exclusive(cfg):
        actions[args.command]()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
