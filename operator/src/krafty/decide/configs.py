"""One config diff, for every place that compares configuration: topic configs, the cluster-wide
dynamic broker config, and the restart-only config a pod runs against its template."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ConfigDiff:
    set: Mapping[str, str] = field(default_factory=dict)  # keys to set, with their new value
    unset: tuple[str, ...] = ()  # keys to return to their default

    def __bool__(self) -> bool:
        return bool(self.set or self.unset)

    def as_changes(self) -> dict[str, str | None]:
        """The incremental-alter form: a value sets, None returns the key to its default."""
        return {**self.set, **dict.fromkeys(self.unset)}

    def describe(self) -> list[str]:
        return [f"{k}={v}" for k, v in self.set.items()] + [f"{k} (back to default)" for k in self.unset]


def diff(desired: Mapping[str, str], actual: Mapping[str, str], keep: Collection[str] = ()) -> ConfigDiff:
    """What turns `actual` into `desired`; keys in `keep` are never unset (others own them)."""
    return ConfigDiff({k: v for k, v in desired.items() if actual.get(k) != v},
                      tuple(sorted(k for k in actual if k not in desired and k not in keep)))
