"""Which data volumes of removed nodes may go: only those the operator has proven empty and forgotten.

The StatefulSets keep their claims when they shrink (whenScaled: Retain), so a
`kubectl scale` or a GitOps tool never deletes data. A claim is deleted here
once its node is outside both the spec and the StatefulSet, its pod is gone,
and Kafka no longer knows it: a broker holds no replica and is unregistered,
a controller is no longer a voter.
"""

from __future__ import annotations

from collections.abc import Iterable

from krafty import naming
from krafty.model.context import Sizes
from krafty.naming import Pool
from krafty.observed import ClusterObservation


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
