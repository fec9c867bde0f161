"""The preflight gate: no node restarts into a new pod template before a preflight pod has started the
JVM with it (krafty.render.preflight); a failed preflight stops the roll until the spec changes.

Only restarts that bring a new pod template (image, JVM options, resources,
scheduling) wait for a preflight; a config-only restart does not (a config that
stops Kafka from starting stops the roll after one node instead). Preflight
pods of other revisions, or of pools with no such restart left, are deleted:
changing the spec back clears a failure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from krafty.decide import roll
from krafty.facts.observed import NodeState, Preflight, PreflightOutcome
from krafty.naming import Pool

FAILED_REASON = "PreflightFailed"


@dataclass(frozen=True)
class Gate:
    step: roll.Step  # the roll step, or what the preflight makes it wait for
    start: Pool | None = None  # start the preflight pod of this pool's current revision
    stale: tuple[str, ...] = ()  # preflight pods to delete


def gate(step: roll.Step, nodes: tuple[NodeState, ...], revisions: Mapping[Pool, str],
         preflights: tuple[Preflight, ...]) -> Gate:
    waiting = {n.pool for n in nodes if n.running and n.template_pending}
    stale = tuple(p.name for p in preflights if p.pool not in waiting or p.revision != revisions.get(p.pool))
    if not (isinstance(step, roll.Restart) and step.node.running and step.node.template_pending):
        return Gate(step, stale=stale)
    pool = step.node.pool
    revision = revisions.get(pool)
    found = next((p for p in preflights if p.pool is pool and p.revision == revision), None)
    what = f"the new pod template of the {pool.value}s"
    if revision is None:
        return Gate(roll.Wait(f"waiting for the StatefulSet to record {what}", roll.Awaits.STATE), stale=stale)
    if found is None:
        return Gate(roll.Wait(f"starting a preflight pod with {what} before any node restarts into it"),
                    start=pool, stale=stale)
    if found.outcome is PreflightOutcome.RUNNING:
        return Gate(roll.Wait(f"preflight pod {found.name} is trying {what}: {found.message}"), stale=stale)
    if found.outcome is PreflightOutcome.FAILED:
        why = found.message.rstrip(".")
        message = (f"{what} failed its preflight, so no node restarts into it ({found.name}): {why}. "
                   "Fix the spec or change it back")
        return Gate(roll.Blocked(step.node.node_id, "", message, reason=FAILED_REASON), stale=stale)
    return Gate(step, stale=stale)
