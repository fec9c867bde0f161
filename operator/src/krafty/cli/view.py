"""What `kubectl krafty` prints: a KafkaCluster's status on one screen, and a plan preview.

Pure text from the KafkaCluster's status (written by the cluster pass), the operator's lag figures and the
preview's JSON (krafty.planning.preview); krafty.cli.kubectl fetches them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from krafty import naming

CONDITIONS = ("Ready", "Available", "Progressing", "Degraded")


@dataclass(frozen=True)
class GroupLag:
    """One consumer group on one topic, as the operator measures it."""

    group: str
    topic: str
    records: float | None  # behind, summed over the topic's partitions (None: not every partition read)
    seconds: float | None  # age of the oldest record it has not processed (largest over the partitions)
    retention_left: float | None  # seconds until retention may delete a record it has not read (smallest)
    type: str = "-"  # classic, consumer, share or streams


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    return ["  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
            for row in (header, *rows)]


def _yes(value: Any) -> str:
    return "-" if value is None else "yes" if value else "no"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds == float("inf"):
        return "never"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"


def _ms(value: int | None) -> str:
    return "-" if value is None else f"{value:,} ms"


def roll_progress(status: Mapping[str, Any]) -> str | None:
    """`n/m nodes on the current configuration`, with the node restarting and what it waits for; None when no
    roll is under way."""
    roll = status.get("roll")
    if not roll:
        return None
    nodes = status.get("nodes") or []
    line = f"{len(nodes) - len(roll.get('pending', ()))}/{len(nodes)} nodes on the current configuration"
    if roll.get("current"):
        line += f"; restarting {roll['current']}"
    pending = [p for p in roll.get("pending", ()) if p != roll.get("current")]
    if pending:
        line += f"; then {', '.join(pending)}"
    if roll.get("blockedBy"):
        line += f"\n  waiting: {roll['blockedBy']}"
    return line


def status_screen(body: Mapping[str, Any], lag: Sequence[GroupLag] = ()) -> str:
    meta, status = body["metadata"], body.get("status") or {}
    versions = status.get("versions") or {}
    lines = [f"KafkaCluster {meta['namespace']}/{meta['name']}   Kafka {status.get('kafkaVersion', '?')} "
             f"(target {versions.get('target', '?')}, metadata.version {versions.get('metadataVersion') or '?'})"]
    if naming.paused(body):
        lines.append("PAUSED: the operator changes nothing until `kubectl krafty resume`")
    conditions = {c["type"]: c for c in status.get("conditions") or []}
    lines += _table(("CONDITION", "STATUS", "REASON", "MESSAGE"),
                    [(kind, conditions[kind].get("status", ""), conditions[kind].get("reason", ""),
                      conditions[kind].get("message", "")) for kind in CONDITIONS if kind in conditions])
    lines.append("")
    lines.append(f"Roll:       {roll_progress(status) or 'none'}")
    scaling = status.get("scaling") or {}
    if scaling.get("phase") not in (None, "Stable"):
        lines.append(f"Scaling:    {scaling['phase']}: {scaling.get('message', '')}")
    canary = status.get("canary")
    if canary:
        lines.append(f"Canary:     write p99 {_ms(canary.get('produceP99Milliseconds'))}, end-to-end p99 "
                     f"{_ms(canary.get('endToEndP99Milliseconds'))} over {canary['windowSeconds']} s "
                     f"({canary['written']} written, {canary['failed']} failed); gate {canary['gate']}")
    quorum = status.get("quorum")
    if quorum:
        lines.append(f"Quorum:     leader {quorum['leaderId']} (epoch {quorum['leaderEpoch']}), voters "
                     f"{', '.join(str(v) for v in quorum['voters'])}, largest follower lag {quorum['maxFollowerLag']}")
    parts = status.get("partitions")
    if parts:
        lines.append(f"Partitions: {parts['total']} total, {parts['underReplicated']} under-replicated, "
                     f"{parts['underMinIsr']} under min ISR, {parts['offline']} offline"
                     + (f" ({parts['eligibleLeadersOnly']} waiting for an eligible leader replica)"
                        if parts.get("eligibleLeadersOnly") else "")
                     + f", {parts['notPreferredLeader']} not on their preferred leader")
    for listener in status.get("listeners") or ():
        lines.append(f"Listener:   {listener['name']} ({listener.get('type', 'internal')}, "
                     f"{listener.get('securityProtocol', '?')}) {listener.get('bootstrapServers') or 'no address yet'}")
    lines.append("")
    node_versions = versions.get("nodes") or {}
    lines += _table(("NODE", "ID", "ROLES", "PHASE", "READY", "VOTER", "IN-SYNC", "LEADERS", "VERSION", "CURRENT",
                     "MESSAGE"),
                    [(n["pod"], str(n["nodeId"]), ",".join(n.get("roles", ())), n.get("phase", ""),
                      _yes(n.get("ready")), _yes(n.get("voter")), _yes(n.get("inSync")),
                      str(n.get("leaderCount", "-")), node_versions.get(n["pod"], "-"), _yes(n.get("revisionCurrent")),
                      n.get("message", "")) for n in status.get("nodes") or []])
    if lag:
        lines.append("")
        lines += _table(("GROUP", "TYPE", "TOPIC", "LAG", "BEHIND", "RETENTION LEFT"),
                        [(g.group, g.type, g.topic, "-" if g.records is None else f"{g.records:.0f}",
                          _duration(g.seconds), _duration(g.retention_left)) for g in lag])
    return "\n".join(lines)


def plan_screen(cluster: str, preview: Mapping[str, Any]) -> str:
    verdict = preview["verdict"]
    lines = [f"Plan for {cluster}: " + {"Refused": "REFUSED, nothing would change",
                                        "NoChange": "nothing would change",
                                        "Changes": "these changes"}.get(verdict, verdict)]
    for message in preview.get("refused") or ():
        lines.append(f"  refused: {message}")
    for config in preview.get("dynamicConfig") or ():
        lines.append(f"  set without a restart: {config}")
    if preview.get("scaling"):
        lines.append(f"  scaling: {preview['scaling']}")
    for volume in preview.get("volumes") or ():
        lines.append(f"  volume grows: {volume}")
    for level in preview.get("features") or ():
        lines.append(f"  feature: {level}")
    for pool in preview.get("preflight") or ():
        lines.append(f"  a preflight pod tries the new pod template of the {pool}s before any of them restarts")
    restarts = preview.get("restarts") or []
    if restarts:
        steps = len({r.get("step", i) for i, r in enumerate(restarts, 1)})
        how = "one at a time" if steps == len(restarts) else f"in {steps} steps (a step's nodes together)"
        lines.append(f"  {len(restarts)} restarts, {how}, in this order:")
        lines += ["    " + line for line in _table(
            ("STEP", "NODE", "ID", "REASON", "WHY", "WOULD WAIT FOR"),
            [(str(r.get("step", i)), r["pod"], str(r["nodeId"]), r["reason"], r["why"], r.get("heldBy") or "-")
             for i, r in enumerate(restarts, 1)])]
    elif verdict != "Refused":
        lines.append("  no node restarts")
    if preview.get("firstStep"):
        lines.append(f"  first: {preview['firstStep']}")
    return "\n".join(lines)
