"""KRaft feature levels (kraft.version, group.version, share.version, ...): what spec.features asks of a running
cluster, and when it is done.

A feature the spec leaves out is never changed: a new cluster is formatted with its release's default, a running
one keeps what it has. A level the spec gives is raised like metadata.version, with which it shares the rule of
when (krafty.decide.upgrade.due): once every node runs a release that runs that level and the cluster is healthy.
It is lowered when Kafka can lower it and no group needs it (nor, for ELR, a partition waiting for an eligible
leader replica); lowering what Kafka cannot lower (kraft.version)
refuses the spec before anything happens, and raising such a feature is the point of no return the plan names.
One feature changes per pass, in name order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from krafty.model import versions


@dataclass(frozen=True)
class FeatureFacts:
    wanted: Mapping[str, int]  # spec.features
    finalized: Mapping[str, int] | None  # the cluster's finalized levels (0: off); None: Kafka not read this pass
    node_versions: tuple[str | None, ...]  # the release each node runs; None: unknown
    groups: Mapping[str, tuple[str, ...]]  # the groups of each type that needs a feature (read when one is lowered)
    eligible_only: tuple[str, ...] = ()  # partitions whose only leader candidates are eligible replicas (ELR)


@dataclass(frozen=True)
class FeatureChange:
    """UpdateFeatures for one feature."""

    name: str
    level: int
    lowering: bool
    message: str


@dataclass(frozen=True)
class FeaturePlan:
    change: FeatureChange | None = None  # this pass's
    waiting: Mapping[str, str] | None = None  # each feature the spec asks for that is not done yet, and why


def irreversible(name: str) -> bool:
    """Raising this feature is a point of no return: Kafka cannot lower it again."""
    known = versions.feature(name)
    return known is not None and not known.lowerable


def refusal(facts: FeatureFacts) -> str | None:
    """Why the spec's features cannot be applied at all (a level Kafka cannot lower, below the cluster's)."""
    for name, level in sorted(facts.wanted.items()):
        current = (facts.finalized or {}).get(name)
        if current is not None and level < current and irreversible(name):
            return (f"spec.features.{name} {level} is below the cluster's {name} {current}, which Kafka cannot "
                    "lower. Nothing changes")
    return None


def _runs(version: str | None, name: str, level: int) -> bool:
    release = versions.release(version) if version is not None else None
    found = release.features.get(name) if release is not None else None
    return found is not None and found.lowest <= level <= found.highest


def plan(facts: FeatureFacts, healthy: bool) -> FeaturePlan:
    """This pass's feature change, if any, and why the others wait. `healthy`: no roll or move under way, every
    node serving."""
    if facts.finalized is None:
        return FeaturePlan()
    waiting: dict[str, str] = {}
    change = None
    for name, level in sorted(facts.wanted.items()):
        current = facts.finalized.get(name, 0)
        if level == current:
            continue
        why = _why_not(facts, name, level, current, healthy)
        if why is not None:
            waiting[name] = why
        elif change is None:
            change = _change(name, level, current)
        else:
            waiting[name] = f"{name} {level}: after {change.name}"
    return FeaturePlan(change, waiting or None)


def _why_not(facts: FeatureFacts, name: str, level: int, current: int, healthy: bool) -> str | None:
    if level > current:
        behind = sorted({v or "an unknown release" for v in facts.node_versions if not _runs(v, name, level)})
        if behind:
            return f"{name} {level} waits for every node to run a release that runs it (some run {', '.join(behind)})"
        if not healthy:
            return f"{name} {level} waits for the cluster to be healthy (no roll, every node serving)"
        return None
    if name == versions.ELIGIBLE_LEADERS and level == 0 and facts.eligible_only:
        return (f"{name} stays {current} while partitions wait for an eligible leader replica "
                f"({_some(facts.eligible_only)}): lowering it clears their ELR and leaves them an unclean election")
    known = versions.feature(name)
    users = facts.groups.get(known.used_by, ()) if known is not None and known.used_by else ()
    if level == 0 and users:
        return (f"{name} stays {current} while {known.used_by if known else ''} groups use it ({_some(users)}): "
                "delete them, or keep the level")
    return None


def _some(names: tuple[str, ...]) -> str:
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def _change(name: str, level: int, current: int) -> FeatureChange:
    if level < current:
        return FeatureChange(name, level, True, f"lowering {name} from {current} to {level} (spec.features)")
    tail = "; Kafka cannot lower it again" if irreversible(name) else ""
    return FeatureChange(name, level, False, f"raising {name} from {current} to {level} (spec.features){tail}")


def described(facts: FeatureFacts) -> tuple[str, ...]:
    """Every level the spec changes, in the order it goes, each with whether it can be undone (a plan's view)."""
    if facts.finalized is None:
        return tuple(f"{name} to {level} (the cluster's levels could not be read)"
                     for name, level in sorted(facts.wanted.items()))
    out = []
    for name, level in sorted(facts.wanted.items()):
        current = facts.finalized.get(name, 0)
        if level > current:
            undo = ("a point of no return: Kafka cannot lower it again" if irreversible(name)
                    else "it can be lowered again")
            out.append(f"{name} raised from {current} to {level} ({undo})")
        elif level < current:
            out.append(f"{name} lowered from {current} to {level}")
    return tuple(out)
