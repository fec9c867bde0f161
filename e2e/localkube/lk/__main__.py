"""localkube: a real single-node Kubernetes cluster on this machine, without Docker or a registry.

  up                      start (or keep) the cluster; waits for the node to be Ready
  down                    stop everything and leave nothing behind (the cache stays)
  status [--json]         what runs, whether the node is Ready, what is left behind when down
  load-images SPEC...     build images with buildah and import them into the cluster's containerd;
                          SPEC is NAME=DOCKERFILE[:CONTEXT] or @LISTFILE (one SPEC per line)
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

from . import base_image, cluster, images, procs
from .settings import Settings


def _specs(args: list[str]) -> list[images.ImageSpec]:
    specs: list[images.ImageSpec] = []
    for arg in args:
        specs += images.parse_list_file(Path(arg[1:])) if arg.startswith("@") else [images.ImageSpec.parse(arg)]
    return specs


def load_images(args: list[str]) -> int:
    cfg = Settings.from_env()
    if procs.pid_of(cfg.pids, "containerd") is None:
        print("localkube: the cluster is not up (run `localkube up` first)", file=sys.stderr)
        return 1
    base_image.ensure(cfg)
    for name, image_id, imported in images.load(cfg, _specs(args)):
        print(f"localkube: {name} {image_id[:12]} {'imported' if imported else 'unchanged'}", flush=True)
    return 0


def print_status(as_json: bool) -> int:
    state = cluster.status()
    if as_json:
        print(json.dumps(state, indent=2))
    else:
        print(f"state: {state['state']}\nnode: {state['node']}\nkubeconfig: {state['kubeconfig']}")
        for name, pid in state["processes"].items():  # type: ignore[attr-defined]
            print(f"  {name:<24} {pid or '-'}")
        for kind, items in state["leftovers"].items():  # type: ignore[attr-defined]
            for item in items:
                print(f"  left behind ({kind}): {item}")
    return 0 if state["state"] == "up" else 1


@contextlib.contextmanager
def exclusive(cfg: Settings) -> Iterator[None]:
    """One up/down/load-images at a time on this machine (several test sessions may share the cluster)."""
    cfg.state.mkdir(parents=True, exist_ok=True)
    with open(cfg.state / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def up() -> int:
    cluster.up()
    return 0


def down() -> int:
    cluster.down()
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="localkube", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["up", "down", "status", "load-images", "kubeconfig", "tools-path",
                                            "base-image"])
    parser.add_argument("--json", action="store_true", help="status: print JSON")
    parser.add_argument("specs", nargs="*", help="load-images: NAME=DOCKERFILE[:CONTEXT] or @LISTFILE")
    args = parser.parse_args(argv)
    cfg = Settings.from_env()
    if args.command == "kubeconfig":
        print(cfg.admin_kubeconfig)
        return 0
    if args.command == "tools-path":
        print(cfg.tools_bin)
        return 0
    if os.geteuid() != 0:
        parser.error("must run as root: it starts the kubelet and containerd and changes iptables")
    if args.command == "status":
        return print_status(args.json)
    actions: dict[str, Callable[[], int]] = {
        "up": up, "down": down, "load-images": lambda: load_images(args.specs),
        "base-image": lambda: print(base_image.ensure(cfg)) or 0,
    }
    with exclusive(cfg):
        return actions[args.command]()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
