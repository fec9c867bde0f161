"""Consumer lag from committed offsets and the log's start and end."""

from __future__ import annotations

from collections.abc import Mapping

from krafty.observed import PartitionLag


def partition_lag(committed: Mapping[str, Mapping[tuple[str, int], int]],
                  logs: Mapping[tuple[str, int], tuple[int, int]]) -> list[PartitionLag]:
    out = []
    for group, offsets in sorted(committed.items()):
        for (topic, partition), offset in sorted(offsets.items()):
            if (topic, partition) not in logs:
                continue
            start, end = logs[(topic, partition)]
            retained = end - start
            headroom = 1.0 if retained <= 0 else max(0.0, min(1.0, (offset - start) / retained))
            out.append(PartitionLag(group, topic, partition, max(0, end - offset), headroom))
    return out
