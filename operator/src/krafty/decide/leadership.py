"""Which replica of the operator leads: one Kubernetes Lease, held by whoever renews it.

Like client-go's leader election, expiry is judged by this replica's own clock: a
Lease whose record has not changed for its whole duration, as seen from here, is
free to take, whatever time the holder wrote into it (clocks of two pods need not
agree). A released Lease (no holder) is free at once: an operator that stops
cleanly hands over without the standby waiting out the duration.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Role(enum.Enum):
    LEADER = "leader"
    STANDBY = "standby"


class LeaseAct(enum.Enum):
    CREATE = "create"  # no Lease yet
    TAKE = "take"  # free (released or expired): write ourselves in, one more transition
    RENEW = "renew"  # ours: write a new renew time
    WAIT = "wait"  # another replica holds it and renews it


@dataclass(frozen=True)
class LeaseRecord:
    holder: str | None
    duration_seconds: int
    transitions: int


@dataclass(frozen=True)
class LeaseDecision:
    act: LeaseAct
    reason: str


def decide(record: LeaseRecord | None, me: str, unchanged_for: float) -> LeaseDecision:
    """`unchanged_for`: seconds since this replica last saw the record change (0 when it just did)."""
    if record is None:
        return LeaseDecision(LeaseAct.CREATE, "no operator leads yet")
    if record.holder == me:
        return LeaseDecision(LeaseAct.RENEW, "this replica leads")
    if not record.holder:
        return LeaseDecision(LeaseAct.TAKE, "the previous leader let go of the lease")
    if unchanged_for >= record.duration_seconds:
        return LeaseDecision(LeaseAct.TAKE, f"{record.holder} has not renewed the lease for {unchanged_for:.0f}s "
                                            f"(its duration is {record.duration_seconds}s)")
    return LeaseDecision(LeaseAct.WAIT, f"{record.holder} leads; this replica stands by")


def lost(role: Role, since_renewed: float, renew_deadline: float) -> bool:
    """A leader that could not renew within the deadline must stop acting: another replica may take over once
    the lease duration (longer than the deadline) has passed without a renewal."""
    return role is Role.LEADER and since_renewed > renew_deadline
