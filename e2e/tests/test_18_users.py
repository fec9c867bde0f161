"""KafkaUsers on real pods, on "secure": one combined node with authorization on, a listener that wants a client
certificate (mtls) and one that wants SCRAM-SHA-512 (scram), and no other. Users get their credentials from the
Secrets the operator writes: kcat and confluent-kafka in the client pod, Kafka's console tools and kafka-acls.sh in
the broker pod (admin, a super user, changes ACLs behind the operator's back). ACLs allow what they name and nothing
else, the Spark job runs as its own user with least privilege, a quota holds a producer back while an unlimited one
beside it runs faster, renewed credentials replace the old ones (a renewed clients CA ends every old certificate
while a client that reloads its Secret keeps working), and a deleted user loses its access."""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import re
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from page_views import events
from reaching import MTLS_LISTENER, SCRAM_LISTENER, kcat, kcat_fails

from krafty.pki import certs, signing
from krafty.render.kafka_config import render_properties
from krafty_testkit.k8s_kafka import (
    NAMESPACE,
    ClientPod,
    KafkaClusterHandle,
    cluster_spec,
    driver_phase,
    leader_metrics_text,
    submit_spark,
    topic_resource,
    wait_topic_ready,
)
from krafty_testkit.kube import KubeCluster, KubeError
from krafty_testkit.plugin import report_table
from krafty_testkit.waiting import wait_for

FILES = "/tmp/users"
QUOTA = 1048576  # bytes per second: writer's producerByteRate
HANDOVER = 5  # seconds: secure's spec.tls.clientsCa.handoverSeconds


def kafka_user(name: str, auth: str, *acls: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "kafka.krafty.io/v1alpha1", "kind": "KafkaUser",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"clusterRef": {"name": "secure"}, "authentication": {"type": auth},
                     "authorization": {"acls": list(acls)}, **spec}}


def allow(kind: str, name: str | None, *operations: str) -> dict[str, Any]:
    return {"resource": {"type": kind, **({"name": name} if name else {})}, "operations": list(operations)}


def user_status(kube: KubeCluster, name: str) -> dict[str, Any]:
    return dict(kube.kubectl_json("get", "kafkauser", name, "-n", NAMESPACE).get("status") or {})


def wait_user_ready(kube: KubeCluster, name: str, timeout: float = 120) -> dict[str, Any]:
    def ready(status: dict[str, Any]) -> bool:
        return any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions", []))

    return wait_for(lambda: user_status(kube, name), ready, timeout, f"KafkaUser {name} Ready")


def secret_data(kube: KubeCluster, name: str) -> dict[str, str]:
    data = kube.kubectl_json("get", "secret", name, "-n", NAMESPACE)["data"]
    return {key: base64.b64decode(value).decode() for key, value in data.items()}


def put(kube: KubeCluster, pod: list[str], name: str, text: str) -> str:
    path = f"{FILES}/{name}"
    kube.kubectl("exec", "-i", "-n", NAMESPACE, *pod, "--", "sh", "-c", f"mkdir -p {FILES} && cat > {path}",
                 stdin=text)
    return path


@pytest.fixture(scope="module")
def secure(operator: KubeCluster, cluster_timings: list[tuple[str, float]]) -> Iterator[KafkaClusterHandle]:
    handle = KafkaClusterHandle(operator, "secure")
    handle.apply(cluster_spec("combined", brokers=1, controllers=1, listeners=[MTLS_LISTENER, SCRAM_LISTENER],
                              topicDefaults={"replicationFactor": 1, "minInsyncReplicas": 1},
                              authorization={"enabled": True, "superUsers": ["admin"]},
                              tls={"clientsCa": {"handoverSeconds": HANDOVER}}))
    cluster_timings.append(("KafkaCluster secure (1 combined node, authorization on): apply to Ready",
                            handle.wait_ready(600)))
    operator.apply([topic_resource(name, "secure", partitions=1, replicas=1) for name in ("ledger", "invoices")])
    for name in ("ledger", "invoices"):
        wait_topic_ready(operator, name)
    yield handle
    operator.kubectl("delete", "topics", "ledger", "invoices", "clicks", "click-counts", "-n", NAMESPACE,
                     "--ignore-not-found", "--wait=true", timeout=120)
    operator.kubectl("delete", "kafkausers", "--all", "-n", NAMESPACE, "--wait=true", timeout=120)
    operator.kubectl("delete", "secret", "rotor-password", "-n", NAMESPACE, "--ignore-not-found")
    handle.delete()


@pytest.fixture(scope="module")
def users(secure: KafkaClusterHandle, operator: KubeCluster) -> dict[str, dict[str, str]]:
    """admin (a super user, certificate), writer (certificate: writes ledger, 1 MiB/s) and reader (SCRAM: reads
    ledger in groups whose names start with readers), Ready; each one's Secret."""
    operator.apply([
        kafka_user("admin", "tls"),
        kafka_user("writer", "tls", allow("topic", "ledger", "Write", "Describe"),
                   quotas={"producerByteRate": QUOTA}),
        kafka_user("reader", "scram-sha-512", allow("topic", "ledger", "Read", "Describe"),
                   {**allow("group", "readers", "Read"), "resource": {"type": "group", "name": "readers",
                                                                     "patternType": "prefix"}}),
    ])
    for name in ("admin", "writer", "reader"):
        wait_user_ready(operator, name)
    return {name: secret_data(operator, name) for name in ("admin", "writer", "reader")}


class Kcat:
    """kcat in the client pod as one certificate user."""

    def __init__(self, client: ClientPod, secure: KafkaClusterHandle, name: str, secret: dict[str, str]) -> None:
        self.client, self.address = client, secure.bootstrap_at(MTLS_LISTENER["port"])
        pod = [client.name]
        self.settings = ["-X", "security.protocol=ssl",
                         "-X", f"ssl.ca.location={put(client.kube, pod, 'ca.crt', secret['ca.crt'])}",
                         "-X", f"ssl.certificate.location={put(client.kube, pod, f'{name}.crt', secret['tls.crt'])}",
                         "-X", f"ssl.key.location={put(client.kube, pod, f'{name}.key', secret['tls.key'])}"]
        self.cli_options = ["--ca", f"{FILES}/ca.crt", "--cert", f"{FILES}/{name}.crt:{FILES}/{name}.key"]

    def produce(self, topic: str, lines: list[str]) -> str:
        """kcat's output; a record Kafka refuses fails the command (KubeError)."""
        return kcat(self.client, "-P", "-b", self.address, *self.settings, "-t", topic, stdin="\n".join(lines) + "\n")

    def read(self, topic: str) -> list[str]:
        return kcat(self.client, "-C", "-b", self.address, *self.settings, "-t", topic, "-o", "beginning", "-e",
                    "-q").split()


class ConsoleTools:
    """Kafka's own tools in the broker pod, as one user (its properties file written from its Secret)."""

    def __init__(self, kube: KubeCluster, secure: KafkaClusterHandle, name: str, secret: dict[str, str]) -> None:
        self.kube, self.pod = kube, [f"{secure.name}-broker-0", "-c", "kafka"]
        if "password" in secret:
            self.address = secure.bootstrap_at(SCRAM_LISTENER["port"])
            props = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                     "sasl.jaas.config": secret["sasl.jaas.config"]}
        else:
            self.address = secure.bootstrap_at(MTLS_LISTENER["port"])
            props = {"security.protocol": "SSL", "ssl.keystore.type": "PEM",
                     "ssl.keystore.certificate.chain": secret["tls.crt"], "ssl.keystore.key": secret["tls.key"]}
        props |= {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": secret["ca.crt"]}
        self.config = put(kube, self.pod, f"{name}.properties", render_properties(props))

    def run(self, command: str, timeout: float = 120) -> str:
        return self.kube.kubectl("exec", "-i", "-n", NAMESPACE, *self.pod, "--", "sh", "-c",
                                 f"{command} 2>&1; echo exit=$?", timeout=timeout)

    def produce(self, topic: str, lines: list[str]) -> str:
        return self.kube.kubectl("exec", "-i", "-n", NAMESPACE, *self.pod, "--", "kafka-console-producer.sh",
                                 "--bootstrap-server", self.address, "--command-config", self.config, "--topic",
                                 topic, stdin="\n".join(lines) + "\n", timeout=120)

    def consume(self, topic: str, group: str, count: int) -> str:
        return self.run(f"kafka-console-consumer.sh --bootstrap-server {self.address} --command-config "
                        f"{self.config} --topic {topic} --group {group} --from-beginning --max-messages {count} "
                        "--timeout-ms 30000")

    def acls(self, *args: str) -> str:
        return self.run(f"kafka-acls.sh --bootstrap-server {self.address} --command-config {self.config} "
                        + " ".join(args))


def test_each_user_works_with_its_own_secret_and_strangers_are_refused(
        secure: KafkaClusterHandle, users: dict[str, dict[str, str]], client: ClientPod, operator: KubeCluster):
    # Given the users Ready, Then each status names its Secret, and the Secret holds its credential
    assert user_status(operator, "writer")["secret"] == "writer"
    assert {"tls.crt", "tls.key", "ca.crt"} <= users["writer"].keys()
    assert certs.facts(users["writer"]["tls.crt"]).common_name == "writer"
    assert {"password", "sasl.jaas.config", "ca.crt"} <= users["reader"].keys()
    # Then writer produces with kcat and with Kafka's console producer, and reads nothing (no Read ACL)
    writer = Kcat(client, secure, "writer", users["writer"])
    writer.produce("ledger", [f"kcat-{i}" for i in range(10)])
    ConsoleTools(operator, secure, "writer", users["writer"]).produce("ledger", [f"console-{i}" for i in range(10)])
    # And reader reads all twenty with confluent-kafka and with Kafka's console consumer, in its group
    scram = ["--ca", writer.cli_options[1], "--scram", f"reader:{users['reader']['password']}"]
    read = client.cli(*scram, "consume", secure.bootstrap_at(SCRAM_LISTENER["port"]), "ledger", "--group", "readers")
    assert (read["consumed"], read["error"]) == (20, None)
    console = ConsoleTools(operator, secure, "reader", users["reader"])
    assert "Processed a total of 20 messages" in console.consume("ledger", "readers-console", 20)
    refused = console.consume("ledger", "billing", 20)  # a group its ACL's prefix does not name
    assert "GroupAuthorizationException" in refused, refused[-2000:]
    # And a SCRAM user writes and reads with kcat, and so does a certificate user (admin)
    operator.apply([kafka_user("scribe", "scram-sha-512", allow("topic", "invoices", "Write", "Read", "Describe"))])
    wait_user_ready(operator, "scribe")
    scribe = secret_data(operator, "scribe")
    sasl = ["-b", scribe["bootstrap.servers"], "-X", "security.protocol=sasl_ssl",
            "-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", f"sasl.username={scribe['username']}",
            "-X", f"sasl.password={scribe['password']}",
            "-X", f"ssl.ca.location={writer.cli_options[1]}", "-t", "invoices"]
    kcat(client, "-P", *sasl, stdin="\n".join(f"scribe-{i}" for i in range(5)) + "\n")
    assert kcat(client, "-C", *sasl, "-o", "beginning", "-e", "-q").split() == [f"scribe-{i}" for i in range(5)]
    assert Kcat(client, secure, "admin", users["admin"]).read("ledger")[:10] == [f"kcat-{i}" for i in range(10)]
    # And with Kafka's console tools: the SCRAM user writes, the certificate user reads
    ConsoleTools(operator, secure, "scribe", scribe).produce("invoices", ["console-scribe"])
    assert "Processed a total of 20 messages" in ConsoleTools(operator, secure, "admin", users["admin"]).consume(
        "ledger", "admin-console", 20)
    # And a certificate the clients CA did not sign is refused, and so is a wrong password
    stranger_ca = signing.new_ca("stranger", datetime.datetime.now(datetime.UTC), datetime.timedelta(days=1))
    stranger = signing.issue(stranger_ca, "writer", (), datetime.datetime.now(datetime.UTC), datetime.timedelta(days=1))
    forged = Kcat(client, secure, "forged", {**users["writer"], "tls.crt": stranger.cert, "tls.key": stranger.key})
    assert "Failed to acquire metadata" in kcat_fails(client, "-b", forged.address, *forged.settings)
    wrong = {**users["reader"], "sasl.jaas.config": users["reader"]["sasl.jaas.config"].replace(
        users["reader"]["password"], "not-the-password")}
    refused = ConsoleTools(operator, secure, "wrong", wrong).run(
        f"timeout 60 kafka-broker-api-versions.sh --bootstrap-server {secure.bootstrap_at(SCRAM_LISTENER['port'])} "
        f"--command-config {FILES}/wrong.properties 2>&1 | grep -v '^[[:space:]]*at '")
    assert "Authentication failed during authentication due to invalid credentials" in refused, refused[-2000:]


def operator_lag(kube: KubeCluster, group: str, topic: str = "ledger") -> float | None:
    """krafty_consumergroup_lag of a group on one of secure's topics, summed over its partitions, as the
    operator serves it (None: the operator reports no lag of that group there)."""
    metrics = leader_metrics_text(kube)
    wanted = {'cluster="secure"', f'group="{group}"', f'topic="{topic}"'}
    prefix = "krafty_consumergroup_lag{"
    values = [float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
              if line.startswith(prefix) and wanted <= set(line[len(prefix):].split("}")[0].split(","))]
    return sum(values) if values else None


def test_the_operator_still_reads_consumer_lag_with_authorization_on(
        secure: KafkaClusterHandle, users: dict[str, dict[str, str]], client: ClientPod, operator: KubeCluster):
    # Given group readers caught up on ledger (the first test), When writer adds five records
    Kcat(client, secure, "writer", users["writer"]).produce("ledger", [f"more-{i}" for i in range(5)])
    # Then the operator, a super user by its certificate, reports a lag of five, as kafka-consumer-groups.sh does
    lag = wait_for(lambda: operator_lag(operator, "readers"), lambda value: value == 5, 90, "a lag of 5 for readers")
    described = ConsoleTools(operator, secure, "admin", users["admin"]).run(
        f"kafka-consumer-groups.sh --bootstrap-server {secure.bootstrap_at(MTLS_LISTENER['port'])} --command-config "
        f"{FILES}/admin.properties --describe --group readers")
    assert re.search(r"readers\s+ledger\s+0\s+20\s+25\s+5\b", described), described[-2000:]
    print(f"\noperator's krafty_consumergroup_lag for readers on secure: {lag:.0f}, as kafka-consumer-groups.sh says")


SPARK_JOB = "pageviews-secure"  # the Spark job, and the KafkaUser it runs as (submit.sh mounts the one of its name)


@pytest.mark.full  # about 2.5 minutes: CI runs the job with a KafkaUser's Secret through the Spark operator
def test_spark_runs_as_its_own_kafkauser_allowed_its_topics_and_lag_group_only(
        secure: KafkaClusterHandle, users: dict[str, dict[str, str]], client: ClientPod, spark_ready: KubeCluster):
    operator = spark_ready
    # Given topics clicks and click-counts, and the job's KafkaUser: SCRAM, may read clicks, write click-counts and
    # commit its lag group, nothing else
    operator.apply([topic_resource("clicks", "secure", partitions=3, replicas=1),
                    topic_resource("click-counts", "secure", partitions=3, replicas=1,
                                   config={"cleanup.policy": "compact"})])
    for name in ("clicks", "click-counts"):
        wait_topic_ready(operator, name)
    operator.apply([kafka_user(SPARK_JOB, "scram-sha-512", allow("topic", "clicks", "Read", "Describe"),
                               allow("topic", "click-counts", "Write", "Describe"),
                               allow("group", f"spark-{SPARK_JOB}", "Read"))])
    wait_user_ready(operator, SPARK_JOB)
    # Then its Secret alone says how to connect: the SCRAM listener's address and protocol, and the credential
    job_secret = secret_data(operator, SPARK_JOB)
    address = secure.bootstrap_at(SCRAM_LISTENER["port"])
    assert (job_secret["bootstrap.servers"], job_secret["security.protocol"], job_secret["sasl.mechanism"],
            job_secret["username"]) == (address, "SASL_SSL", "SCRAM-SHA-512", SPARK_JOB)
    # When admin writes the page views and the job runs (spark-submit, cluster mode) with that Secret mounted
    admin = Kcat(client, secure, "admin", users["admin"])
    lines, expected = events()
    admin.produce("clicks", lines)
    submit_spark(operator, NAMESPACE, "secure", SPARK_JOB, "--job-name", SPARK_JOB, "--input-topics", "clicks",
                 "--output-topic", "click-counts", "--checkpoint", f"/data/{SPARK_JOB}/{int(time.time())}/checkpoint",
                 "--trigger", "available-now", "--window", "1m", "--watermark", "2m")
    phase = wait_for(lambda: driver_phase(operator, NAMESPACE, SPARK_JOB), lambda p: p in ("Succeeded", "Failed"),
                     900, "the Spark driver to finish", interval=5)
    assert phase == "Succeeded", operator.kubectl("logs", "-n", NAMESPACE, "-l", "spark-role=driver", "--tail=80")
    # Then its counts are right
    values = client.cli(*admin.cli_options, "last-values", secure.bootstrap_at(MTLS_LISTENER["port"]),
                        "click-counts")["values"]
    got = {(v["page"], v["window_start"]): v["views"] for v in map(json.loads, values.values())}
    assert got == dict(expected)
    # And its lag group works with authorization on: five more page views are a lag of five, as the operator says
    admin.produce("clicks", lines[:5])
    lag = wait_for(lambda: operator_lag(operator, f"spark-{SPARK_JOB}", "clicks"), lambda v: v == 5, 90,
                   "a lag of 5 for the Spark job's group")
    print(f"\nthe Spark job's lag group on secure, as the operator reports it: {lag:.0f}")
    # And its user may read nothing else
    ca = put(client.kube, [client.name], "ca.crt", job_secret["ca.crt"])
    denied = client.cli("--ca", ca, "--scram", f"{SPARK_JOB}:{job_secret['password']}", "consume", address, "ledger",
                        "--group", f"spark-{SPARK_JOB}")
    assert denied["error"] == "TOPIC_AUTHORIZATION_FAILED"
    # And the driver's log never shows its password
    drivers = operator.kubectl_json("get", "pods", "-n", NAMESPACE, "-l", "spark-role=driver")["items"]
    driver = max((p for p in drivers if p["metadata"]["name"].startswith(f"{SPARK_JOB}-")),
                 key=lambda p: p["metadata"]["creationTimestamp"])
    log = operator.kubectl("logs", "-n", NAMESPACE, driver["metadata"]["name"])
    assert "SCRAM-SHA-512" in log  # (its Kafka clients did log their settings)
    assert job_secret["password"] not in log


def test_acls_allow_what_they_name_and_nothing_else(
        secure: KafkaClusterHandle, users: dict[str, dict[str, str]], client: ClientPod):
    writer = Kcat(client, secure, "writer", users["writer"])
    # When writer produces to invoices, which no ACL of its names, Then Kafka refuses: topic authorization
    with pytest.raises(KubeError, match="Topic authorization failed"):
        writer.produce("invoices", ["not-allowed"])
    # When reader, which may only read, produces (idempotent, as every producer by default), Then Kafka refuses
    # it a producer id: it may write nowhere
    scram = ["--ca", writer.cli_options[1], "--scram", f"reader:{users['reader']['password']}"]
    address = secure.bootstrap_at(SCRAM_LISTENER["port"])
    with pytest.raises(KubeError, match="CLUSTER_AUTHORIZATION_FAILED"):
        client.cli(*scram, "produce-lines", address, "ledger", stdin="a\nb\n")
    # And reading needs the group ACL too: in a group its ACLs do not name, reader is refused
    assert client.cli(*scram, "consume", address, "ledger", "--group", "someone-else")["error"] == (
        "GROUP_AUTHORIZATION_FAILED")


@pytest.mark.full  # about 30 s: CI sees drift put back for Topics in test_20_topics.py
def test_acls_changed_behind_the_operators_back_are_put_back_for_its_users_only(
        secure: KafkaClusterHandle, users: dict[str, dict[str, str]], operator: KubeCluster):
    admin = ConsoleTools(operator, secure, "admin", users["admin"])
    # Given an ACL added with kafka-acls.sh for reader (managed) and one for outsider (no KafkaUser)
    for principal in ("User:reader", "User:outsider"):
        said = admin.acls("--add", "--allow-principal", principal, "--operation", "Write", "--topic", "invoices")
        assert "exit=0" in said, said[-2000:]
    began = time.monotonic()
    # Then reader's is removed within a pass, and outsider's stays
    wait_for(lambda: admin.acls("--list", "--topic", "invoices"), lambda listed: "User:reader" not in listed, 90,
             "reader's extra ACL removed", interval=3)
    print(f"\nreader's ACL added behind the operator's back was removed after {time.monotonic() - began:.1f} s")
    assert "principal=User:outsider" in admin.acls("--list", "--topic", "invoices")
    events = operator.kubectl_json("get", "events", "-n", NAMESPACE, "--field-selector",
                                   "involvedObject.kind=KafkaUser,involvedObject.name=reader")["items"]
    assert any(e["reason"] == "DriftReverted" for e in events)
    admin.acls("--remove", "--force", "--allow-principal", "User:outsider", "--operation", "Write", "--topic",
               "invoices")


def blast(client: ClientPod, options: list[str], address: str, seconds: int) -> subprocess.Popen[str]:
    argv = [str(client.kube.tools / "kubectl"), "--kubeconfig", str(client.kube.kubeconfig), "exec", "-n",
            NAMESPACE, client.name, "--", "python3", "/app/traffic_cli.py", *options, "blast", address, "invoices",
            "--rate-mib", "2", "--warmup", "30", "--seconds", str(seconds)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_quota_holds_a_producer_back_while_an_unlimited_one_beside_it_runs_faster(
        secure: KafkaClusterHandle, users: dict[str, dict[str, str]], client: ClientPod, operator: KubeCluster):
    # Given writer (1 MiB/s) may write invoices too, and admin (no quota) beside it
    operator.apply([kafka_user("writer", "tls", allow("topic", "ledger", "Write", "Describe"),
                               allow("topic", "invoices", "Write", "Describe"), quotas={"producerByteRate": QUOTA})])
    wait_for(lambda: user_status(operator, "writer"), lambda s: s.get("acls") == 4, 90, "writer's four ACLs")
    writer, admin = Kcat(client, secure, "writer", users["writer"]), Kcat(client, secure, "admin", users["admin"])
    address = secure.bootstrap_at(MTLS_LISTENER["port"])
    # When both offer 2 MiB/s at the same time, what each gets acknowledged counted for 30 s after 30 s. Kafka
    # meters a quota over a window of samples it fills as the client starts, and lets bursts through until the
    # window is full and settled: counted after 10 s, writer measured 1.10 MiB/s here, after 20 s 1.09, after 30 s
    # 1.02 (offering twice the quota; four times: more bursts).
    running = {name: blast(client, kcat_user.cli_options, address, 30)
               for name, kcat_user in (("writer", writer), ("admin", admin))}
    rates = {}
    for name, proc in running.items():
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err[-2000:]
        rates[name] = json.loads(out.strip().splitlines()[-1])
    report_table("Offering 2 MiB/s at once: a user with producerByteRate 1 MiB/s beside one without a quota "
                 "(acknowledged in 30 s, after 30 s)",
                 ["user", "quota", "acknowledged (MiB)", "seconds", "MiB/s"],
                 [[name, "1 MiB/s" if name == "writer" else "none", round(r["bytes"] / 2**20, 1), r["seconds"],
                   r["mib_per_s"]] for name, r in rates.items()])
    # Then writer stays within 1.1 MiB/s, and admin runs faster
    assert rates["writer"]["mib_per_s"] <= 1.1
    assert rates["admin"]["mib_per_s"] > rates["writer"]["mib_per_s"]


@pytest.mark.full  # about 40 s: CI replaces a credential in the renewal test below
def test_a_password_changed_in_its_secret_replaces_the_old_one(
        secure: KafkaClusterHandle, users: dict[str, dict[str, str]], client: ClientPod, operator: KubeCluster):
    # Given rotor, whose password comes from the user's own Secret
    operator.kubectl("delete", "secret", "rotor-password", "-n", NAMESPACE, "--ignore-not-found")
    operator.kubectl("create", "secret", "generic", "rotor-password", "-n", NAMESPACE, "--from-literal",
                     "password=first-password")
    operator.apply([{**kafka_user("rotor", "scram-sha-512", allow("topic", "ledger", "Describe")), "spec": {
        "clusterRef": {"name": "secure"}, "authentication": {"type": "scram-sha-512", "password": {
            "secretKeyRef": {"name": "rotor-password", "key": "password"}}},
        "authorization": {"acls": [allow("topic", "ledger", "Describe")]}}}])
    wait_user_ready(operator, "rotor")
    address = secure.bootstrap_at(SCRAM_LISTENER["port"])
    ca = put(client.kube, [client.name], "ca.crt", users["reader"]["ca.crt"])

    def can_describe(password: str) -> bool:
        return client.cli("--ca", ca, "--scram", f"rotor:{password}", "partitions", address, "ledger",
                          timeout=60).get("partitions") == 1

    assert can_describe("first-password")
    # When the user's Secret gets a new password
    operator.kubectl("patch", "secret", "rotor-password", "-n", NAMESPACE, "--type", "merge", "-p",
                     json.dumps({"stringData": {"password": "second-password"}}))
    began = time.monotonic()
    # Then a client that reloads it gets in with the new one, and the old one is refused
    wait_for(lambda: secret_data(operator, "rotor")["password"], lambda p: p == "second-password", 90,
             "the new password in rotor's Secret")
    wait_for(lambda: can_describe("second-password"), bool, 90, "the new password accepted", interval=3)
    print(f"\nrotor's new password was accepted {time.monotonic() - began:.1f} s after its Secret changed")
    with pytest.raises(KubeError):
        can_describe("first-password")


def renewed(kube: KubeCluster, kind: str, name: str, annotation: str) -> None:
    kube.kubectl("annotate", "--overwrite", kind, name, "-n", NAMESPACE, f"kafka.krafty.io/{annotation}={time.time()}")


def can_write(user: Kcat) -> bool:
    try:
        user.produce("ledger", ["probe"])
    except KubeError:
        return False
    return True


def test_a_renewed_credential_replaces_the_old_one_at_once(
        secure: KafkaClusterHandle, users: dict[str, dict[str, str]], client: ClientPod, operator: KubeCluster):
    # When reader (a generated password) and writer (a certificate) are asked for new credentials
    renewed(operator, "kafkauser", "reader", "renew-credential")
    renewed(operator, "kafkauser", "writer", "renew-credential")
    began = time.monotonic()
    # Then each Secret holds a new one: a new password, a new key and certificate
    reader = wait_for(lambda: secret_data(operator, "reader"), lambda d: d["password"] != users["reader"]["password"],
                      90, "a new password in reader's Secret")
    writer = wait_for(lambda: secret_data(operator, "writer"), lambda d: d["tls.key"] != users["writer"]["tls.key"],
                      90, "a new key in writer's Secret")
    assert certs.facts(writer["tls.crt"]).common_name == "writer"
    # And the new password gets in while the old one is refused; the new certificate writes
    ca = put(client.kube, [client.name], "ca.crt", reader["ca.crt"])
    address = secure.bootstrap_at(SCRAM_LISTENER["port"])

    def reads_with(password: str) -> bool:
        try:
            got = client.cli("--ca", ca, "--scram", f"reader:{password}", "consume", address, "ledger", "--group",
                             "readers-renewed", timeout=60)
        except KubeError:
            return False
        return got["error"] is None

    wait_for(lambda: reads_with(reader["password"]), bool, 90, "reader's new password accepted", interval=3)
    print(f"\nreader's renewed password was accepted {time.monotonic() - began:.1f} s after the annotation")
    assert not reads_with(users["reader"]["password"])
    assert can_write(Kcat(client, secure, "writer-renewed", writer))
    users.update(reader=reader, writer=writer)
    events = operator.kubectl_json("get", "events", "-n", NAMESPACE, "--field-selector",
                                   "involvedObject.kind=KafkaUser,involvedObject.name=writer")["items"]
    assert any("renewed, as an annotation asked" in e["message"] for e in events)


def delivered(client: ClientPod, user: Kcat) -> bool:
    """One record acknowledged, written with confluent-kafka as `user`: it waits up to a minute for the broker
    (secure's one node restarts twice during a clients CA renewal; kcat gives up at once when it is down)."""
    try:
        return client.cli(*user.cli_options, "produce-lines", user.address, "ledger", stdin="probe\n")["acked"] == 1
    except KubeError:
        return False


def brokers_trust_only(operator: KubeCluster, secure: KafkaClusterHandle, bundle: str) -> bool:
    """Whether secure's node runs, Ready, with `bundle` as its clients CA trust."""
    pod = operator.kubectl_json("get", "pod", f"{secure.name}-broker-0", "-n", NAMESPACE)
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions") or [])
    digest = hashlib.sha256(bundle.encode()).hexdigest()[:16]
    return ready and pod["metadata"]["annotations"].get("kafka.krafty.io/clients-ca") == digest


@pytest.mark.full  # about 150 s: CI renews a user's certificate in the test before
def test_a_renewed_clients_ca_keeps_a_reloading_client_working_and_old_certificates_stop_working(
        secure: KafkaClusterHandle, users: dict[str, dict[str, str]], client: ClientPod, operator: KubeCluster):
    bundle = f"{secure.name}-clients-ca-cert"
    before = secret_data(operator, bundle)["ca.crt"]
    old = secret_data(operator, "writer")
    # When the cluster is asked for a new clients CA
    renewed(operator, "kafkacluster", secure.name, "renew-clients-ca")
    began = time.monotonic()
    # Then a client that reads writer's Secret before each write keeps writing, through both rolls of the node, while
    # the brokers trust both CAs, writer gets a certificate of the new one, and the previous CA is let go
    seen: dict[str, float] = {}
    writes, failures = 0, []
    deadline = began + 600
    while time.monotonic() < deadline:
        current = secret_data(operator, "writer")
        trusted = secret_data(operator, bundle)["ca.crt"]
        if trusted.count("BEGIN CERTIFICATE") == 2:
            seen.setdefault("brokers told to trust both CAs", time.monotonic() - began)
        if current["tls.crt"] != old["tls.crt"]:
            seen.setdefault("writer's certificate issued by the new CA", time.monotonic() - began)
        if trusted != before and trusted.count("BEGIN CERTIFICATE") == 1:
            seen.setdefault("the previous CA let go", time.monotonic() - began)
            if brokers_trust_only(operator, secure, trusted):
                seen.setdefault("the node runs trusting only the new CA", time.monotonic() - began)
                break
        writes += 1
        if not delivered(client, Kcat(client, secure, "writer-reloading", current)):
            failures.append(time.monotonic() - began)
        time.sleep(2)
    users.update({name: secret_data(operator, name) for name in ("admin", "writer")})
    report_table(f"Clients CA renewed (handoverSeconds {HANDOVER}), a client reloading writer's Secret before each "
                 "write", ["step", "seconds after the annotation"], [[step, round(at, 1)] for step, at in seen.items()])
    assert len(seen) == 4, seen
    # And it never failed to write; the certificate from before is refused now, the new one writes
    assert writes > 0
    assert failures == [], failures
    assert "Failed to acquire metadata" in kcat_fails(client, "-b", secure.bootstrap_at(MTLS_LISTENER["port"]),
                                                      *Kcat(client, secure, "writer-old", old).settings)
    new = secret_data(operator, "writer")
    assert certs.signed_by(new["tls.crt"], secret_data(operator, bundle)["ca.crt"])
    assert can_write(Kcat(client, secure, "writer-new", new))
    print(f"\n{writes} writes by the reloading client during the renewal, {len(failures)} failed")


def test_a_deleted_user_loses_its_acls_quota_and_credential_within_seconds(
        secure: KafkaClusterHandle, users: dict[str, dict[str, str]], client: ClientPod, operator: KubeCluster):
    writer = Kcat(client, secure, "writer", users["writer"])
    admin = ConsoleTools(operator, secure, "admin", users["admin"])
    writer.produce("ledger", ["before-deletion"])
    # When the KafkaUsers writer and reader are deleted
    began = time.monotonic()
    operator.kubectl("delete", "kafkauser", "writer", "reader", "-n", NAMESPACE, "--wait=true", timeout=120)
    gone = time.monotonic() - began
    # Then their ACLs, writer's quota and reader's SCRAM credential are gone from Kafka, and their Secrets
    assert "User:writer" not in admin.acls("--list", "--topic", "ledger")
    assert "User:reader" not in admin.acls("--list", "--topic", "ledger")
    quotas = admin.run(f"kafka-configs.sh --bootstrap-server {admin.address} --command-config {admin.config} "
                       "--describe --entity-type users")
    assert "writer" not in quotas, quotas[-2000:]
    assert "reader" not in quotas, quotas[-2000:]
    with pytest.raises(KubeError):
        operator.kubectl("get", "secret", "writer", "-n", NAMESPACE)
    # And writer's certificate (still valid: nothing revokes it) may no longer write
    with pytest.raises(KubeError, match="Topic authorization failed"):
        writer.produce("ledger", ["after-deletion"])
    print(f"\nKafkaUsers writer and reader deleted, with everything they held in Kafka, in {gone:.1f} s")
