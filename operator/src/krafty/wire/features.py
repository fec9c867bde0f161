"""Feature levels (ApiVersions v4, the request Kafka's describeFeatures sends: the levels the cluster finalized and
the range the answering node supports) and raising one (UpdateFeatures v1): how the operator reads every feature
and finalizes metadata.version after an upgrade."""

from __future__ import annotations

from krafty.wire.codec import Reader, Writer, check

API_VERSIONS = 18
UPDATE_FEATURES = 57
METADATA_VERSION = "metadata.version"
_SUPPORTED_FEATURES_TAG = 0
_FINALIZED_FEATURES_TAG = 2
_UPGRADE, _SAFE_DOWNGRADE = 1, 2  # UpdateFeatures' upgrade types


def encode_api_versions(software: str, version: str) -> Writer:
    return Writer().compact_string(software).compact_string(version).tags()


def decode_features(r: Reader) -> tuple[dict[str, int], dict[str, tuple[int, int]]]:
    """From an ApiVersions v3 or v4 answer (its header has no tags): the finalized (max) level of each feature the
    cluster finalized, and the (min, max) level the answering node supports of each it knows."""
    check("ApiVersions", r.int16(), None)

    def api(a: Reader) -> None:
        a.int16()
        a.int16()
        a.int16()
        a.skip_tags()

    r.compact_array(api)
    r.int32()
    finalized: dict[str, int] = {}
    supported: dict[str, tuple[int, int]] = {}
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        field = Reader(r.take(size))
        if tag == _FINALIZED_FEATURES_TAG:
            def level(f: Reader) -> None:
                name, max_level = f.compact_string() or "", f.int16()
                f.int16()  # min level
                f.skip_tags()
                finalized[name] = max_level

            field.compact_array(level)
        elif tag == _SUPPORTED_FEATURES_TAG:
            def supports(f: Reader) -> None:
                name, lowest, highest = f.compact_string() or "", f.int16(), f.int16()
                f.skip_tags()
                supported[name] = (lowest, highest)

            field.compact_array(supports)
    return finalized, supported


def encode_upgrade_feature(feature: str, level: int, timeout_ms: int, validate_only: bool = False,
                           downgrade: bool = False) -> Writer:
    """One feature raised (or, `downgrade`, lowered as Kafka allows: a safe downgrade) to `level`."""
    kind = _SAFE_DOWNGRADE if downgrade else _UPGRADE

    def update(w: Writer, item: tuple[str, int]) -> None:
        w.compact_string(item[0]).int16(item[1]).int8(kind).tags()

    return Writer().int32(timeout_ms).compact_array([(feature, level)], update).int8(1 if validate_only else 0).tags()


def decode_update_features(r: Reader) -> None:
    """Raises KafkaProtocolError when the controller refused the request, or the feature's update."""
    r.int32()
    check("UpdateFeatures", r.int16(), r.compact_string())
    refused: list[tuple[int, str]] = []

    def result(f: Reader) -> None:
        name, code, message = f.compact_string() or "", f.int16(), f.compact_string()
        f.skip_tags()
        if code:
            refused.append((code, f"{name}: {message or ''}".rstrip(": ")))

    r.compact_array(result)
    r.skip_tags()
    for code, message in refused:
        check("UpdateFeatures", code, message)
