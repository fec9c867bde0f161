"""Finalized feature levels (ApiVersions v3, the request Kafka's describeFeatures sends) and raising one
(UpdateFeatures v1): how the operator reads and finalizes metadata.version after an upgrade."""

from __future__ import annotations

from krafty.wire.codec import Reader, Writer, check

API_VERSIONS = 18
UPDATE_FEATURES = 57
METADATA_VERSION = "metadata.version"
_FINALIZED_FEATURES_TAG = 2
_UPGRADE = 1


def encode_api_versions(software: str, version: str) -> Writer:
    return Writer().compact_string(software).compact_string(version).tags()


def decode_finalized_features(r: Reader) -> dict[str, int]:
    """The finalized (max) level of each feature, from an ApiVersions v3 answer (its header has no tags)."""
    check("ApiVersions", r.int16(), None)

    def api(a: Reader) -> None:
        a.int16()
        a.int16()
        a.int16()
        a.skip_tags()

    r.compact_array(api)
    r.int32()
    finalized: dict[str, int] = {}
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        field = Reader(r.take(size))
        if tag == _FINALIZED_FEATURES_TAG:
            def feature(f: Reader) -> None:
                name, max_level = f.compact_string() or "", f.int16()
                f.int16()  # min level
                f.skip_tags()
                finalized[name] = max_level

            field.compact_array(feature)
    return finalized


def encode_upgrade_feature(feature: str, level: int, timeout_ms: int, validate_only: bool = False) -> Writer:
    def update(w: Writer, item: tuple[str, int]) -> None:
        w.compact_string(item[0]).int16(item[1]).int8(_UPGRADE).tags()

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
