"""What the batched passes (Topics, KafkaUsers) report on one resource, and their rule for a paused cluster."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import Enum
from typing import Generic, TypeVar


@dataclass(frozen=True)
class Verdict:
    """What to report on one resource."""

    ready: bool
    reason: str
    message: str
    progressing: bool = False
    events: tuple[tuple[str, str, bool], ...] = ()  # (reason, message, warning)
    manage: bool = True  # the operator acts on it (False: invalid, refused, a conflict, pending adoption)


V = TypeVar("V", bound=Verdict)
K = TypeVar("K")
R = TypeVar("R", bound=Enum)


@dataclass(frozen=True)
class Refusal(Generic[R]):
    """What Kafka answered to a change it did not take: why (an enum whose values are status reasons), in its
    words."""

    reason: R
    message: str

    @property
    def events(self) -> tuple[tuple[str, str, bool], ...]:
        """The warning Event that tells the resource's owner."""
        return ((self.reason.value, self.message, True),)


def withheld(verdicts: Mapping[K, V], reason: str, why: str) -> dict[K, V]:
    """The same verdicts with every change withheld (a paused cluster changes nothing): a resource that had a
    change to make says it waits, and why."""
    return {key: replace(v, ready=False, reason=reason, message=f"waiting: {why} ({v.message})", events=())
            if v.manage and v.progressing else v for key, v in verdicts.items()}
