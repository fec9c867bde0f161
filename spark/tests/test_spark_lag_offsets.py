"""Reading processed offsets out of Spark's progress events (pure)."""

from __future__ import annotations

import json

from krafty_spark.lag import advanced, end_offsets


def test_end_offsets_of_every_kafka_source_and_topic():
    sources = [json.dumps({"views": {"0": 102, "1": 108}, "clicks": {"0": 7}}), json.dumps({"views": {"2": 90}})]
    assert end_offsets(sources) == {("views", 0): 102, ("views", 1): 108, ("views", 2): 90, ("clicks", 0): 7}


def test_sources_that_are_not_kafka_offsets_contribute_nothing():
    sources = [None, "", "not json", "42", json.dumps({"logOffset": 3}), json.dumps({"t": {"x": 1, "0": -1}})]
    assert end_offsets(sources) == {}


def test_the_same_partition_in_two_sources_keeps_the_larger_offset():
    assert end_offsets([json.dumps({"t": {"0": 5}}), json.dumps({"t": {"0": 9}})]) == {("t", 0): 9}


def test_only_offsets_beyond_what_was_committed_move():
    committed = {("t", 0): 10, ("t", 1): 4}
    assert advanced({("t", 0): 10, ("t", 1): 6, ("t", 2): 0}, committed) == {("t", 1): 6, ("t", 2): 0}
    assert advanced({("t", 0): 9}, committed) == {}
