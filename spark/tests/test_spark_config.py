"""Options and the mounted connection ConfigMap: pure parsing, no Spark, no Kafka."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from pageview_data import T0, AmbiguousTestData, EventFactory, expected_results, four_phases, minutes
from spark_harness import mount_configmap

from krafty_spark.config import (
    ConfigError,
    Duration,
    KafkaConnection,
    parse_args,
    read_connection_dir,
    resolve_connection,
)
from krafty_spark.events import PageView

REQUIRED = ["--input-topics", "views", "--output-path", "/out", "--checkpoint", "/ck"]


@pytest.mark.parametrize(("text", "interval", "millis"), [
    ("500ms", "500 milliseconds", 500), ("10s", "10 seconds", 10_000), ("1m", "1 minutes", 60_000),
    (" 2h ", "2 hours", 7_200_000)])
def test_durations_become_spark_intervals(text, interval, millis):
    duration = Duration.parse(text)
    assert duration.spark_interval == interval
    assert duration.millis == millis


@pytest.mark.parametrize("text", ["", "10", "1.5m", "0s", "-1s", "10 minutes", "1d"])
def test_bad_durations_are_refused_with_the_accepted_form(text):
    with pytest.raises(ConfigError, match=r"whole number and ms, s, m or h|must be positive"):
        Duration.parse(text)


def test_mounted_configmap_is_read_through_the_kubelet_symlinks(tmp_path):
    # Given a ConfigMap mounted as the kubelet does it (key -> ..data/key -> ..<stamp>/key), with padding
    directory = mount_configmap(tmp_path / "conn", {
        "bootstrap.servers": " prod-kafka-bootstrap.kafka.svc.cluster.local:9092\n",
        "security.protocol": "PLAINTEXT\n", "unrelated": "x"})
    # Then the documented keys are read, trimmed, and nothing else
    assert read_connection_dir(directory) == {
        "bootstrap.servers": "prod-kafka-bootstrap.kafka.svc.cluster.local:9092", "security.protocol": "PLAINTEXT"}


def test_a_missing_connection_dir_reads_as_empty(tmp_path):
    assert read_connection_dir(tmp_path / "absent") == {}


def test_command_line_overrides_the_configmap(tmp_path):
    mounted = {"bootstrap.servers": "from-configmap:9092", "security.protocol": "PLAINTEXT"}
    assert resolve_connection(mounted, None, None, tmp_path) == KafkaConnection("from-configmap:9092", "PLAINTEXT")
    assert resolve_connection(mounted, "cli:9092", "ssl", tmp_path, tmp_path / "ca.crt") == KafkaConnection(
        "cli:9092", "SSL", str(tmp_path / "ca.crt"))
    assert resolve_connection({}, "cli:9092", None, tmp_path).security_protocol == "PLAINTEXT"


def test_tls_from_the_configmap_trusts_the_mounted_cluster_ca(tmp_path):
    # Given the connection ConfigMap of a cluster whose first listener speaks TLS, and its CA Secret mounted
    directory = mount_configmap(tmp_path / "conn", {
        "bootstrap.servers": "b:9094", "security.protocol": "SSL", "ssl.truststore.type": "PEM",
        "ssl.truststore.secret": "prod-cluster-ca-cert", "ssl.truststore.secret.key": "ca.crt"})
    ca = tmp_path / "kafka-ca" / "ca.crt"
    ca.parent.mkdir()
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    options = parse_args([*REQUIRED, "--connection-dir", str(directory)], default_ca=ca)
    # Then Spark's Kafka client and librdkafka both trust it
    assert options.kafka.spark_options() == {
        "kafka.bootstrap.servers": "b:9094", "kafka.security.protocol": "SSL",
        "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": str(ca)}
    assert options.kafka.client_config() == {"bootstrap.servers": "b:9094", "security.protocol": "SSL",
                                             "ssl.ca.location": str(ca)}


def test_tls_without_a_ca_names_the_secret_to_mount(tmp_path):
    mounted = {"bootstrap.servers": "b:9094", "security.protocol": "SSL",
               "ssl.truststore.secret": "prod-cluster-ca-cert"}
    with pytest.raises(ConfigError, match="mount the Secret prod-cluster-ca-cert at /etc/krafty/kafka-ca"):
        parse_args(REQUIRED, mounted=mounted, default_ca=tmp_path / "absent.crt")
    with pytest.raises(ConfigError, match=r"--ca-file .*missing\.crt is not a file"):
        parse_args([*REQUIRED, "--ca-file", str(tmp_path / "missing.crt")], mounted=mounted)


SCRAM_USER = {"bootstrap.servers": "secure-kafka-bootstrap.kafka.svc.cluster.local:9096",
              "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "username": "spark-views",
              "password": "s3cret", "ca.crt": "-----BEGIN CERTIFICATE-----",
              "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                  'username="spark-views" password="s3cret";'}


def test_the_job_runs_as_the_scram_kafkauser_whose_secret_is_mounted(tmp_path):
    # Given the cluster's ConfigMap (its first listener: plaintext) and a SCRAM KafkaUser's Secret, mounted
    connection = mount_configmap(tmp_path / "conn", {"bootstrap.servers": "b:9092", "security.protocol": "PLAINTEXT"})
    user = mount_configmap(tmp_path / "user", SCRAM_USER)
    options = parse_args([*REQUIRED, "--connection-dir", str(connection), "--user-dir", str(user)],
                         default_ca=tmp_path / "absent.crt")
    # Then Spark's Kafka client reaches the user's listener with its password, trusting the Secret's CA
    assert options.kafka.spark_options() == {
        "kafka.bootstrap.servers": SCRAM_USER["bootstrap.servers"], "kafka.security.protocol": "SASL_SSL",
        "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": str(user / "ca.crt"),
        "kafka.sasl.mechanism": "SCRAM-SHA-512", "kafka.sasl.jaas.config": SCRAM_USER["sasl.jaas.config"]}
    # And so does the lag committer's librdkafka client
    assert options.kafka.client_config() == {
        "bootstrap.servers": SCRAM_USER["bootstrap.servers"], "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(user / "ca.crt"), "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "spark-views", "sasl.password": "s3cret"}
    # And the password is never printed
    assert "s3cret" not in repr(options)


def test_the_job_runs_as_the_tls_kafkauser_whose_secret_is_mounted(tmp_path):
    user = {"bootstrap.servers": "b:9095", "security.protocol": "SSL", "tls.crt": "CERT", "tls.key": "KEY",
            "ca.crt": "CA"}
    options = parse_args(REQUIRED, mounted={}, user=user, default_ca=tmp_path / "absent.crt")
    spark = options.kafka.spark_options()
    assert (spark["kafka.bootstrap.servers"], spark["kafka.ssl.keystore.type"]) == ("b:9095", "PEM")
    assert (spark["kafka.ssl.keystore.certificate.chain"], spark["kafka.ssl.keystore.key"]) == ("CERT", "KEY")
    client = options.kafka.client_config()
    assert (client["ssl.certificate.pem"], client["ssl.key.pem"]) == ("CERT", "KEY")
    assert "KEY" not in repr(options)


@pytest.mark.parametrize(("user", "args", "problem"), [
    ({**SCRAM_USER, "security.protocol": "SSL"}, [], "SCRAM, which security.protocol SSL cannot carry"),
    (SCRAM_USER, ["--security-protocol", "PLAINTEXT"], "SCRAM, which security.protocol PLAINTEXT cannot carry"),
    ({"bootstrap.servers": "b:9095", "security.protocol": "SASL_SSL", "tls.crt": "C", "tls.key": "K"}, [],
     "a certificate, which security.protocol SASL_SSL cannot carry: use SSL"),
    ({"bootstrap.servers": "b:9095", "security.protocol": "SSL", "tls.crt": "C"}, [], "only one of tls.crt"),
    ({"bootstrap.servers": "b:9096", "security.protocol": "SASL_SSL", "password": "p"}, [],
     "a password but no username"),
])
def test_a_mounted_user_secret_that_cannot_work_is_refused_saying_why(tmp_path, user, args, problem):
    ca = tmp_path / "ca.crt"
    ca.write_text("CA")
    with pytest.raises(ConfigError, match=problem):
        parse_args([*REQUIRED, *args], mounted={}, user=user, default_ca=ca)


def test_no_bootstrap_address_anywhere_says_what_to_pass_or_mount(tmp_path):
    # Given a connection dir without bootstrap.servers, and no --bootstrap-servers
    (tmp_path / "security.protocol").write_text("PLAINTEXT")
    with pytest.raises(ConfigError) as error:
        parse_args([*REQUIRED, "--connection-dir", str(tmp_path)])
    # Then the message names both ways out and what was found
    message = str(error.value)
    assert "--bootstrap-servers" in message
    assert "kafka-connection ConfigMap" in message
    assert f"{tmp_path} has no bootstrap.servers file" in message


def test_options_from_the_mounted_configmap_and_defaults(tmp_path):
    directory = mount_configmap(tmp_path / "conn", {"bootstrap.servers": "b:9092"})
    options = parse_args([*REQUIRED, "--connection-dir", str(directory), "--job-name", "clicks"])
    assert options.kafka.spark_options() == {"kafka.bootstrap.servers": "b:9092",
                                             "kafka.security.protocol": "PLAINTEXT"}
    assert options.lag_group == "spark-clicks"
    assert options.sink == "files"
    assert options.trigger == Duration(10, "s")
    assert (options.window, options.watermark) == (Duration(1, "m"), Duration(2, "m"))
    assert options.max_poll_records == 5000
    assert not options.available_now


def test_available_now_kafka_sink_and_explicit_lag_group():
    options = parse_args(["--input-topics", "a, b", "--output-topic", "counts", "--checkpoint", "/ck",
                          "--trigger", "available-now", "--lag-group", "my-group"],
                         mounted={"bootstrap.servers": "b:9092"})
    assert options.available_now
    assert options.input_topics == ("a", "b")
    assert (options.sink, options.lag_group) == ("kafka", "my-group")


@pytest.mark.parametrize(("args", "problem"), [
    (["--input-topics", "views", "--output-topic", "views", "--checkpoint", "/ck"], "also an input topic"),
    (["--input-topics", " , ", "--output-path", "/o", "--checkpoint", "/ck"], "names no topic"),
    ([*REQUIRED, "--max-offsets-per-trigger", "0"], "at least 1"),
    ([*REQUIRED, "--max-poll-records", "0"], "--max-poll-records must be at least 1"),
    ([*REQUIRED, "--watermark", "soon"], "not a duration")])
def test_contradictory_options_are_refused(args, problem):
    with pytest.raises(ConfigError, match=problem):
        parse_args(args, mounted={"bootstrap.servers": "b:9092"})


def test_exactly_one_sink_is_required():
    with pytest.raises(SystemExit):
        parse_args(["--input-topics", "v", "--checkpoint", "/ck"], mounted={"bootstrap.servers": "b:9092"})
    with pytest.raises(SystemExit):
        parse_args([*REQUIRED, "--output-topic", "t"], mounted={"bootstrap.servers": "b:9092"})


def test_events_are_encoded_with_millisecond_utc_timestamps():
    event = PageView("e1", "u1", "/cart", T0 + minutes(1) + timedelta(milliseconds=125))
    assert event.to_json() == b'{"event_id":"e1","user":"u1","page":"/cart","ts":"2026-01-01T00:01:00.125Z"}'


def test_the_reference_drops_by_window_end_and_keeps_only_final_windows_for_files():
    # Given the four phases the integration tests use
    phases = four_phases(seed=7, per_phase=40)
    expected = expected_results(phases)
    # Then phase 3's window-0 events and phase 4's late ones are dropped, window 1's late ones are counted
    assert expected.dropped == 10 + 10
    assert [w.isoformat() for w in expected.watermarks] == [
        "2025-12-31T23:59:59+00:00", "2026-01-01T00:01:59+00:00", "2026-01-01T00:01:59+00:00",
        "2026-01-01T00:04:59+00:00"]
    assert sum(expected.kafka.values()) == 4 * 40 - 20
    assert {start.minute for _, start in expected.files} == {0, 1, 2, 3}
    assert {start.minute for _, start in expected.kafka} == {0, 1, 2, 3, 6}


def test_the_reference_refuses_events_whose_fate_depends_on_batching():
    # Given an event in window 0 (ends 1:00) arriving together with one at 3:30 (watermark could reach 1:30)
    make = EventFactory(seed=8)
    phase = make.between(2, minutes(0.5), minutes(3.5))
    with pytest.raises(AmbiguousTestData):
        expected_results([phase])


def test_paths_in_options_are_kept_as_given(tmp_path: Path):
    options = parse_args(["--input-topics", "v", "--output-path", str(tmp_path / "o"), "--checkpoint",
                          str(tmp_path / "c")], mounted={"bootstrap.servers": "b:9092"})
    assert (options.output_path, options.checkpoint) == (str(tmp_path / "o"), str(tmp_path / "c"))
