"""Finding and removing what a cluster leaves on the machine: processes, mounts, network namespaces,
the bridge and its veths, iptables chains, cgroups and files.

"Ours" is decided narrowly, because other people's containers and test processes share the machine:
- processes: the cluster's programs whose command line names our state or run dir (every one does:
  its config, certificates or socket live there) and everything inside the kubelet's kubepods cgroups;
- mounts: under the state dir, the run dir and containerd's root;
- loop devices: those whose backing file is one of csi-loop's volumes (under the state dir);
- network namespaces: containerd mounts them under our run dir; older `cni-*` ones in /run/netns
  (containerd's naming) with no process left in them;
- iptables: every KUBE-* chain; CNI-* chains whose rules carry our CNI network name; the shared
  CNI-HOSTPORT-* chains only when no other CNI network still maps a port through them; kube-router's
  rules in the built-in chains (their comments name it);
- ipsets: every KUBE-* set (kube-router's, for NetworkPolicies), once no rule points at them.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from . import procs
from . import settings as s
from .settings import Settings

NETNS_DIR = Path("/run/netns")
CGROUP_ROOT = Path("/sys/fs/cgroup")
HOSTPORT_CHAINS = ("CNI-HOSTPORT-DNAT", "CNI-HOSTPORT-SNAT", "CNI-HOSTPORT-MASQ", "CNI-HOSTPORT-SETMARK")
NETWORK_TAG = f'name: \\"{s.NETWORK_NAME}\\"'  # in the comment of every iptables rule CNI makes for us
KUBE_ROUTER_TAG = "kube-router"  # in the comment of every rule kube-router puts in a built-in chain
# The cluster's programs. Other people on the machine may run the same ones (an API server for
# integration tests, say): a process is ours only when its command line names our state or run dir.
PROGRAMS = ("etcd", "containerd", "containerd-shim-runc-v2", "runc", "kube-apiserver", "kube-controller-manager",
            "kube-scheduler", "kubelet", "kube-proxy", "coredns", "local-path-provisioner", "kube-router", "csi-loop",
            "csi-provisioner", "csi-resizer")


# Processes

def kubepods_pids() -> set[int]:
    pids: set[int] = set()
    for controller in ("pids", "memory", "cpu", "freezer"):
        top = CGROUP_ROOT / controller / "kubepods"
        if top.is_dir():
            for procs_file in top.rglob("cgroup.procs"):
                with contextlib.suppress(OSError):
                    pids.update(int(line) for line in procs_file.read_text().split())
    return pids


def _is_ours(pid: int, markers: tuple[str, ...]) -> bool:
    try:
        # A program rebuilt while it ran (csi-loop after an edit) shows as "NAME (deleted)".
        name = os.path.basename(os.readlink(f"/proc/{pid}/exe")).removesuffix(" (deleted)")
    except OSError:
        return False
    return name in PROGRAMS and any(m in arg for arg in procs.cmdline(pid) for m in markers)


def our_processes(cfg: Settings) -> set[int]:
    markers = (str(cfg.state) + "/", str(cfg.run) + "/")
    return {pid for pid in procs.all_pids() if _is_ours(pid, markers)} | kubepods_pids()


def kill_all(pids: set[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


# Mounts

def _unescape(path: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), path)


def under(path: str, roots: tuple[Path, ...]) -> bool:
    return any(path == str(root) or path.startswith(f"{root}/") for root in roots)


def our_mounts(cfg: Settings) -> list[str]:
    points = (_unescape(line.split()[4]) for line in Path("/proc/self/mountinfo").read_text().splitlines())
    return [point for point in points if under(point, cfg.owned_paths())]


def unmount_all(cfg: Settings) -> None:
    for _ in range(10):  # stacked mounts come back one layer at a time
        mounts = our_mounts(cfg)
        if not mounts:
            return
        for point in sorted(set(mounts), key=lambda p: p.count("/"), reverse=True):
            if subprocess.run(["umount", point], capture_output=True, check=False).returncode != 0:
                subprocess.run(["umount", "-l", point], capture_output=True, check=False)


# Loop devices (csi-loop's volumes)

def our_loop_devices(cfg: Settings) -> list[str]:
    """"/dev/loopN <backing file>" for every loop device attached to one of our volumes' files."""
    found = []
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        with contextlib.suppress(OSError):
            file = backing.read_text().strip().removesuffix(" (deleted)")
            if under(file, (cfg.csi_volumes,)):
                found.append(f"/dev/{backing.parent.parent.name} {file}")
    return found


def detach_loop_devices(cfg: Settings) -> None:
    """After unmount_all: a device still mounted somewhere (a lazy unmount) is freed once that mount goes."""
    for device in our_loop_devices(cfg):
        subprocess.run(["losetup", "--detach", device.split()[0]], capture_output=True, check=False)


# Network namespaces and links

def _netns_in_use() -> set[int]:
    inodes = set()
    for pid in procs.all_pids():
        with contextlib.suppress(OSError):
            inodes.add(os.stat(f"/proc/{pid}/ns/net").st_ino)
    return inodes


def dead_cni_netns() -> list[str]:
    if not NETNS_DIR.is_dir():
        return []
    in_use = _netns_in_use()
    dead = []
    for ns in NETNS_DIR.glob("cni-*"):
        try:
            if os.stat(ns).st_ino not in in_use:
                dead.append(ns.name)
        except OSError:
            dead.append(ns.name)
    return dead


def delete_netns(names: list[str]) -> None:
    """Best effort: what cannot go (see netns_mounts_under_state_dir in render.py) stays listed in leftovers."""
    for name in names:
        subprocess.run(["umount", str(NETNS_DIR / name)], capture_output=True, check=False)
        with contextlib.suppress(OSError):
            (NETNS_DIR / name).unlink(missing_ok=True)


def our_links() -> list[str]:
    """The bridge and the veths attached to it."""
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=False).stdout
    links = []
    for line in out.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name == s.BRIDGE or f" master {s.BRIDGE} " in line:
            links.append(name)
    return links


def delete_links(names: list[str]) -> None:
    for name in sorted(names, key=lambda n: n == s.BRIDGE):  # the bridge last
        subprocess.run(["ip", "link", "del", name], capture_output=True, check=False)


# iptables

@dataclass
class Table:
    name: str
    chains: list[str] = field(default_factory=list)
    rules: list[tuple[str, str]] = field(default_factory=list)  # (chain, full "-A chain ..." line)


def _parse_save(text: str) -> list[Table]:
    tables: list[Table] = []
    for line in text.splitlines():
        if line.startswith("*"):
            tables.append(Table(line[1:]))
        elif line.startswith(":") and tables:
            tables[-1].chains.append(line[1:].split()[0])
        elif line.startswith("-A ") and tables:
            tables[-1].rules.append((line.split()[1], line))
    return tables


def _jump_target(rule: str) -> str | None:
    words = rule.split()
    for flag in ("-j", "-g"):
        if flag in words and words.index(flag) + 1 < len(words):
            return words[words.index(flag) + 1]
    return None


def _orphans(table: Table) -> set[str]:
    """CNI chains nothing jumps to any more whose rules still point into our pod subnet (an interrupted down)."""
    targets = {_jump_target(rule) for _, rule in table.rules}
    subnet = s.NODE_POD_CIDR.rsplit(".", 1)[0] + "."
    return {chain for chain, rule in table.rules
            if chain.startswith("CNI-") and chain not in HOSTPORT_CHAINS and chain not in targets and subnet in rule}


def _our_chains(table: Table) -> set[str]:
    tagged = [(chain, rule) for chain, rule in table.rules if NETWORK_TAG in rule]
    ours = {c for c in table.chains if c.startswith("KUBE-")}
    cni = {chain for chain, _ in tagged} | {_jump_target(rule) or "" for _, rule in tagged}
    ours |= {c for c in cni if c.startswith("CNI-") and c not in HOSTPORT_CHAINS}
    ours |= _orphans(table)
    still_mapping = [r for c, r in table.rules if c in HOSTPORT_CHAINS[:2]
                     and NETWORK_TAG not in r and _jump_target(r) not in ours]
    if not still_mapping:  # nobody else forwards a host port through portmap's shared chains
        ours |= {c for c in table.chains if c in HOSTPORT_CHAINS}
    return ours


def _cleanup_script(table: Table) -> tuple[list[str], set[str]]:
    ours = _our_chains(table)
    deletes = ["-D " + rule[3:] for chain, rule in table.rules if chain not in ours and (
        _jump_target(rule) in ours or NETWORK_TAG in rule or KUBE_ROUTER_TAG in rule.lower())]
    return deletes + [f"-F {c}" for c in sorted(ours)] + [f"-X {c}" for c in sorted(ours)], ours


def our_iptables_chains() -> list[str]:
    found = []
    for tool in ("iptables", "ip6tables"):
        for table in _parse_save(_save(tool)):
            found += [f"{tool}/{table.name}/{c}" for c in sorted(_our_chains(table))]
    return found


def _save(tool: str) -> str:
    if shutil.which(f"{tool}-save") is None:
        return ""
    return subprocess.run([f"{tool}-save"], capture_output=True, text=True, check=False).stdout


def clean_iptables() -> None:
    for tool in ("iptables", "ip6tables"):
        lines = []
        for table in _parse_save(_save(tool)):
            commands, _ = _cleanup_script(table)
            if commands:
                lines += [f"*{table.name}", *commands, "COMMIT"]
        if lines:
            result = subprocess.run([f"{tool}-restore", "-w", "--noflush"], input="\n".join(lines) + "\n",
                                    capture_output=True, text=True, check=False)
            if result.returncode != 0:
                raise RuntimeError(f"{tool}-restore failed: {result.stderr.strip()}\n" + "\n".join(lines))


def our_ipsets() -> list[str]:
    if shutil.which("ipset") is None:
        return []
    listed = subprocess.run(["ipset", "list", "-n"], capture_output=True, text=True, check=False).stdout
    return [name for name in listed.split() if name.startswith("KUBE-")]


def destroy_ipsets() -> None:
    """After clean_iptables: a set still referenced by a rule cannot be destroyed."""
    for name in our_ipsets():
        result = subprocess.run(["ipset", "destroy", name], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"ipset destroy {name} failed: {result.stderr.strip()}")


# cgroups and files

def our_cgroups() -> list[Path]:
    return [CGROUP_ROOT / c / "kubepods" for c in os.listdir(CGROUP_ROOT)
            if (CGROUP_ROOT / c / "kubepods").is_dir()]


def remove_cgroups() -> None:
    for top in our_cgroups():
        for folder in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                folder.rmdir()
        with contextlib.suppress(OSError):
            top.rmdir()


# Files and folders containerd, the CNI plugins and the kubelet make at fixed places, whatever their
# configured roots (the kubelet's device-plugin socket path is a constant); folders go when empty.
KUBELET_SOCKET = Path("/var/lib/kubelet/device-plugins/kubelet.sock")
SHARED_FOLDERS = ("/run/containerd/s", "/run/containerd", "/run/netns", "/var/lib/cni/results", "/var/lib/cni",
                  "/var/log/containers", "/var/lib/kubelet/device-plugins", "/var/lib/kubelet")


def remove_cni_cache(container_ids: list[str]) -> None:
    """The CNI plugins' result cache for the given sandboxes (kept when a sandbox goes without CNI DEL)."""
    results = Path("/var/lib/cni/results")
    if results.is_dir():
        for cached in results.iterdir():
            if any(f"-{cid}-" in cached.name for cid in container_ids) or cached.name.startswith(s.NETWORK_NAME):
                cached.unlink(missing_ok=True)


def remove_files(cfg: Settings) -> None:
    remaining = our_mounts(cfg)
    if remaining:  # rmtree would walk into them (a kubelet subPath bind mount can point at host files)
        raise RuntimeError(f"still mounted, so the cluster's files stay: {remaining}")
    for path in (cfg.cluster, cfg.run):
        shutil.rmtree(path, ignore_errors=True)
    containers_logs = Path("/var/log/containers")
    if containers_logs.is_dir():
        for link in containers_logs.iterdir():
            if link.is_symlink() and os.readlink(link).startswith(str(cfg.pod_logs)):
                link.unlink()
    KUBELET_SOCKET.unlink(missing_ok=True)
    for folder in SHARED_FOLDERS:
        with contextlib.suppress(OSError):
            Path(folder).rmdir()


def leftovers(cfg: Settings) -> dict[str, list[str]]:
    """Everything of this cluster still on the machine; all empty after `down`."""
    return {
        "processes": [f"{pid} {' '.join(procs.cmdline(pid))[:120]}" for pid in sorted(our_processes(cfg))],
        "mounts": our_mounts(cfg),
        "loop devices": our_loop_devices(cfg),
        "netns": dead_cni_netns(),
        "links": our_links(),
        "iptables": our_iptables_chains(),
        "ipsets": our_ipsets(),
        "cgroups": [str(p) for p in our_cgroups()],
    }


def clean(cfg: Settings) -> None:
    """Removes whatever is left once the cluster's own programs are stopped."""
    for _ in range(3):
        pids = our_processes(cfg)
        if not pids:
            break
        kill_all(pids)
        procs.wait_gone(pids, timeout=10)
    unmount_all(cfg)
    detach_loop_devices(cfg)
    delete_netns(dead_cni_netns())
    delete_links(our_links())
    clean_iptables()
    destroy_ipsets()
    remove_cgroups()
    remove_files(cfg)
