"""Each broker's log directories (DescribeLogDirs v4, KIP-827): the size of the volume under each and the bytes
still free on it, and whether the directory is online. The request names no topic, so the answer carries the
directories alone, not the size of every partition in them."""

from __future__ import annotations

from dataclasses import dataclass

from krafty.wire.codec import ERROR_NAMES, Reader, Writer, check

DESCRIBE_LOG_DIRS = 35
KAFKA_STORAGE_ERROR = 56


@dataclass(frozen=True)
class LogDir:
    path: str
    total_bytes: int  # the file system's size; -1 when the broker could not tell
    usable_bytes: int  # what is still free on it; -1 likewise
    error: str | None = None  # KAFKA_STORAGE_ERROR: the directory is offline

    @property
    def online(self) -> bool:
        return self.error is None


def encode_describe_log_dirs() -> Writer:
    return Writer().compact_array([], lambda _w, _t: None).tags()


def _skip_topic(t: Reader) -> None:
    t.compact_string()

    def partition(p: Reader) -> None:
        p.int32()  # index
        p.int64()  # size
        p.int64()  # offset lag
        p.boolean()  # is a future replica
        p.skip_tags()

    t.compact_array(partition)
    t.skip_tags()


def decode_describe_log_dirs(r: Reader) -> tuple[LogDir, ...]:
    r.int32()  # throttle time
    check("DescribeLogDirs", r.int16(), None)

    def result(d: Reader) -> LogDir:
        code, path = d.int16(), d.compact_string() or ""
        d.compact_array(_skip_topic)
        total, usable = d.int64(), d.int64()
        d.skip_tags()
        return LogDir(path, total, usable, ERROR_NAMES.get(code, f"error {code}") if code else None)

    dirs = tuple(r.compact_array(result))
    r.skip_tags()
    return dirs
