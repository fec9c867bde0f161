"""A Kafka version change: whether the spec's version can run at all, and when metadata.version is raised.

The nodes move to the new release through the ordinary safe roll (their image
changes). Kafka keeps the cluster's finalized metadata.version meanwhile, and
nodes of either release run it, so the change can be rolled back. Once every
node runs the target release and the cluster has been healthy for
`upgrade.finalizeAfterSeconds` (or when the user raises
`upgrade.metadataVersion`), the level is raised; from then on no release
below it can start, so a version that cannot run it is refused before a
single node restarts.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from enum import StrEnum

from krafty.model import versions


class VersionPhase(StrEnum):
    STEADY = "Steady"  # every node runs the target; metadata.version is where it should be
    ROLLING = "Rolling"  # nodes are moving to the target release
    FINALIZING = "Finalizing"  # every node runs it: metadata.version is raised after the healthy time
    HELD = "Held"  # every node runs it; metadata.version stays at upgrade.metadataVersion, below the release's


@dataclass(frozen=True)
class VersionFacts:
    target: str  # spec.version
    pinned: str | None  # spec.upgrade.metadataVersion
    finalize_after_seconds: int
    node_versions: tuple[str | None, ...]  # the release each node's pod runs; None: unknown (a foreign image)
    metadata_level: int | None  # the cluster's finalized metadata.version; None: not read this pass


@dataclass(frozen=True)
class VersionPlan:
    phase: VersionPhase
    message: str
    finalize_to: int | None = None  # raise metadata.version to this level now
    healthy_since: datetime.datetime | None = None  # to remember: every node on the target and healthy since
    due: datetime.datetime | None = None  # when metadata.version is raised if the cluster stays healthy


def refusal(facts: VersionFacts) -> str | None:
    """Why the spec's version (or pinned metadata.version) cannot be applied: nothing changes then."""
    for running in sorted({v for v in facts.node_versions if v is not None and v != facts.target}):
        path = versions.upgrade_path(running, facts.target)
        if path is not None:
            return f"spec.version {facts.target}: {path}"
    target = versions.release(facts.target)
    level = facts.metadata_level
    if target is None or level is None:
        return None
    if target.metadata_level < level:
        kept = ", ".join(sorted({v for v in facts.node_versions if v is not None})) or "what they run"
        return (f"spec.version {facts.target} cannot run the cluster's metadata.version "
                f"{versions.metadata_name(level)}, finalized after the upgrade (Kafka cannot lower it): a downgrade "
                f"is only possible before that. Nothing changes; the nodes keep running {kept}")
    pinned = versions.metadata_level(facts.pinned) if facts.pinned else None
    if pinned is not None and pinned < level:
        return (f"spec.upgrade.metadataVersion {facts.pinned} is below the cluster's metadata.version "
                f"{versions.metadata_name(level)}, which Kafka cannot lower. Nothing changes")
    return None


def plan(facts: VersionFacts, healthy: bool, now: datetime.datetime | None,
         healthy_since: datetime.datetime | None) -> VersionPlan:
    """Where the change stands, and whether metadata.version is raised this pass. `healthy`: the roll has no step
    left and every node serves; `now`: when the pass observed (None: unknown, nothing is raised)."""
    target = versions.release(facts.target)
    assert target is not None  # the CRD and the model allow listed versions only
    behind = sum(v != facts.target for v in facts.node_versions)
    if behind:
        return VersionPlan(VersionPhase.ROLLING, f"{len(facts.node_versions) - behind} of "
                                                 f"{len(facts.node_versions)} nodes run Kafka {facts.target}")
    level = facts.metadata_level
    wanted = versions.metadata_level(facts.pinned) if facts.pinned else target.metadata_level
    if level is None or wanted is None or level >= wanted:
        if level is not None and facts.pinned and level < target.metadata_level:
            return VersionPlan(VersionPhase.HELD, f"metadata.version held at {versions.metadata_name(level)} by "
                                                  f"spec.upgrade.metadataVersion ({facts.target} finalizes "
                                                  f"{target.metadata_version})")
        return VersionPlan(VersionPhase.STEADY, f"every node runs Kafka {facts.target}")
    if facts.pinned:  # the user chose this level: raised once every node runs the release, without waiting
        return _finalize(facts, wanted, healthy, healthy_since, now, 0)
    return _finalize(facts, wanted, healthy, healthy_since, now, facts.finalize_after_seconds)


def _finalize(facts: VersionFacts, wanted: int, healthy: bool, since: datetime.datetime | None,
              now: datetime.datetime | None, wait_seconds: int) -> VersionPlan:
    name = versions.metadata_name(wanted)
    if not healthy or now is None:
        return VersionPlan(VersionPhase.FINALIZING, f"every node runs Kafka {facts.target}; metadata.version "
                                                    f"{name} waits for the cluster to be healthy")
    since = since or now
    due = since + datetime.timedelta(seconds=wait_seconds)
    if now < due:
        # The time it is due, not a countdown: the status (and its message) stays the same from pass to pass
        return VersionPlan(VersionPhase.FINALIZING, f"every node runs Kafka {facts.target}; metadata.version is "
                                                    f"raised to {name} at {due.isoformat(timespec='seconds')} if the "
                                                    "cluster stays healthy (spec.upgrade.finalizeAfterSeconds): until "
                                                    "then spec.version can go back", healthy_since=since, due=due)
    return VersionPlan(VersionPhase.FINALIZING, f"raising metadata.version to {name}: every node runs Kafka "
                                                f"{facts.target} and the cluster stayed healthy",
                       finalize_to=wanted, healthy_since=since)
