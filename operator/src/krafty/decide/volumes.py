"""The data volumes: which of removed nodes may go, and how the others grow to the spec's size.

The StatefulSets keep their claims when they shrink (whenScaled: Retain), so a
`kubectl scale` or a GitOps tool never deletes data. A claim is deleted here
once its node is outside both the spec and the StatefulSet, its pod is gone,
and Kafka no longer knows it: a broker holds no replica and is unregistered,
a controller is no longer a voter.

A larger storage.size is asked of each claim directly (a StatefulSet's claim
template never changes): the storage driver grows the volume and the kubelet
its file system, online when the driver can. A file system still waiting for
its node well after that restarts the node through the safe roll. A smaller
size, or a class without allowVolumeExpansion, is refused and changes nothing.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from krafty import naming
from krafty.facts.observed import ClusterObservation, StorageClassState, VolumeResize, VolumeState
from krafty.model.common import format_bytes, parse_quantity
from krafty.model.context import Sizes
from krafty.naming import Pool

# The kubelet grows a mounted file system within seconds when the driver can do it online; one still waiting after
# this grows only when its pod starts again.
ONLINE_RESIZE_WAIT = datetime.timedelta(minutes=2)
REFUSED = "VolumeResizeRefused"
FAILED = "VolumeResizeFailed"


def _forgotten(node_id: int, pool: Pool, obs: ClusterObservation) -> bool:
    if pool is Pool.BROKER:
        if obs.partitions is None or obs.reassignments != {}:
            return False  # Kafka cannot say the broker is empty
        return (node_id not in {r.node_id for r in obs.registrations}
                and all(node_id not in p.replicas for p in obs.partitions))
    if obs.quorum is None or obs.quorum.leader_id < 0:
        return False
    return node_id not in obs.quorum.voter_ids() | {o.node_id for o in obs.quorum.observers}


def removable(cluster: str, claims: Iterable[str], obs: ClusterObservation, wanted: Sizes,
              running: Sizes) -> tuple[str, ...]:
    """Claims of nodes the cluster no longer has and Kafka has forgotten, to delete this pass."""
    existing = {n.node_id for n in obs.nodes if n.exists}
    out = []
    for claim in sorted(claims):
        found = naming.claim_node(cluster, claim)
        if found is None:
            continue
        pool, ordinal = found
        node_id = naming.node_id(pool, ordinal)
        if (ordinal >= max(wanted.of_pool(pool), running.of_pool(pool)) and node_id not in existing
                and _forgotten(node_id, pool, obs)):
            out.append(claim)
    return tuple(out)


@dataclass(frozen=True)
class WantedSize:
    """What the spec asks of one pool's volumes."""

    pool: Pool
    size: str  # the spec's quantity
    field: str  # where the spec says it, for messages
    replicas: int  # nodes of the pool this pass: claims of removed nodes are left as they are

    @property
    def bytes(self) -> int:
        return int(parse_quantity(self.size))


@dataclass(frozen=True)
class Growth:
    expand: tuple[tuple[str, str], ...] = ()  # (claim, size) to ask for this pass
    refused: str | None = None  # why the spec's size cannot be had; nothing of that pool grows
    reason: str = ""  # REFUSED (the spec asks what cannot be) or FAILED (the driver refused)
    growing: str | None = None  # what still grows, while any volume is not at the spec's size
    restarts: Mapping[int, str] = field(default_factory=dict)  # node id -> why it restarts: its file system waits


def _expandable(volume: VolumeState, classes: Mapping[str, StorageClassState | None]) -> str | None:
    """Why the claim's class cannot grow it, or None."""
    if not volume.storage_class:
        return f"{volume.claim} has no StorageClass"
    found = classes.get(volume.storage_class)
    if found is None:
        return f"StorageClass {volume.storage_class} of {volume.claim} does not exist"
    if not found.expandable:
        return f"StorageClass {volume.storage_class} of {volume.claim} does not allow volume expansion " \
               "(allowVolumeExpansion is not true)"
    return None


def _pool_problem(wanted: WantedSize, claims: Sequence[VolumeState],
                  classes: Mapping[str, StorageClassState | None]) -> str | None:
    larger = [v for v in claims if v.requested > wanted.bytes]
    if larger:
        most = max(v.requested for v in larger)
        return (f"{wanted.field} is {wanted.size}, but {len(larger)} volumes already have more "
                f"({larger[0].claim}: {format_bytes(larger[0].requested)}): a volume cannot shrink; "
                f"set at least {format_bytes(most)}")
    for volume in claims:
        why = _expandable(volume, classes) if volume.requested < wanted.bytes else None
        if why:
            return f"{wanted.field} asks for {wanted.size}, but {why}"
    return None


def _state(volume: VolumeState, size: str) -> str:
    have = format_bytes(volume.capacity) if volume.capacity is not None else "unbound"
    said = f": {volume.message}" if volume.message else ""
    return f"{volume.claim} has {have} of {size}, {volume.resize.value}{said}"


def growth(cluster: str, wanted: Sequence[WantedSize], volumes: Sequence[VolumeState],
           classes: Mapping[str, StorageClassState | None], now: datetime.datetime | None) -> Growth:
    """What to ask of the claims this pass, and how their growth stands."""
    expand: list[tuple[str, str]] = []
    refused: list[tuple[str, str]] = []
    growing: list[str] = []
    restarts: dict[int, str] = {}
    by_pool = {w.pool: w for w in wanted}
    owned: dict[Pool, list[tuple[int, VolumeState]]] = {}
    for volume in volumes:
        found = naming.claim_node(cluster, volume.claim)
        if found is not None and found[0] in by_pool and found[1] < by_pool[found[0]].replicas:
            owned.setdefault(found[0], []).append((found[1], volume))
    for pool, claims in sorted(owned.items()):
        size = by_pool[pool]
        problem = _pool_problem(size, [v for _, v in claims], classes)
        if problem:
            refused.append((REFUSED, problem))
            continue
        for ordinal, volume in sorted(claims, key=lambda c: c[0]):
            if volume.requested < size.bytes:
                expand.append((volume.claim, size.size))
                growing.append(f"{volume.claim} asked to grow to {size.size}")
            elif volume.resize is VolumeResize.INFEASIBLE:
                refused.append((FAILED, f"the storage driver cannot grow {volume.claim} to {size.size}"
                                        f"{': ' + volume.message if volume.message else ''}"))
            elif volume.resize is not VolumeResize.AT_SIZE or (volume.capacity is not None
                                                               and volume.capacity < size.bytes):
                growing.append(_state(volume, size.size))
                waited = now - volume.since if now and volume.since else None
                if volume.resize is VolumeResize.FILE_SYSTEM_PENDING and waited and waited > ONLINE_RESIZE_WAIT:
                    restarts[naming.node_id(pool, ordinal)] = (
                        f"the file system of {volume.claim} has waited {int(waited.total_seconds())} s to grow to "
                        f"{size.size}: the storage driver grows it only when the pod starts")
    total = sum(len(c) for c in owned.values())
    return Growth(tuple(expand), "; ".join(m for _, m in refused) or None, refused[0][0] if refused else "",
                  f"{total - len(growing)} of {total} volumes at their size; " + "; ".join(growing[:3])
                  + (f" and {len(growing) - 3} more" if len(growing) > 3 else "") if growing else None, restarts)


def wanted_sizes(pools: Iterable[tuple[Pool, str | None, int]]) -> tuple[WantedSize, ...]:
    """(pool, its storage size or None for an emptyDir, its nodes this pass) → what each pool's claims should have."""
    return tuple(WantedSize(pool, size, f"spec.{pool.value}s.storage.size", replicas)
                 for pool, size, replicas in pools if size is not None)
