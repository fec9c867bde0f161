"""The job's options: command line, and the Kafka connection the operator publishes.

The operator writes, for a KafkaCluster C, a ConfigMap `C-kafka-connection`
with the keys `bootstrap.servers` and `security.protocol` and, when its first
listener speaks TLS, `ssl.truststore.secret`: the Secret (`C-cluster-ca-cert`)
whose `ca.crt` the client trusts, mounted at /etc/krafty/kafka-ca. Mounted as a
directory the ConfigMap holds one file per key; `read_connection_dir` reads it
and command-line options override what it says. The Secret of the KafkaUser
the job runs as, when mounted (`--user-dir`), names the listener to reach and
holds the credential to reach it with. Nothing here runs Spark or a Kafka
client.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

DEFAULT_CONNECTION_DIR = Path("/etc/krafty/kafka-connection")
DEFAULT_CA_FILE = Path("/etc/krafty/kafka-ca/ca.crt")
DEFAULT_USER_DIR = Path("/etc/krafty/kafka-user")
CONNECTION_KEYS = ("bootstrap.servers", "security.protocol", "ssl.truststore.secret")
# What a KafkaUser's Secret holds (the operator writes it): the listener it reaches, and its credential
USER_KEYS = ("bootstrap.servers", "security.protocol", "sasl.mechanism", "username", "password", "sasl.jaas.config",
             "tls.crt", "tls.key", "ca.crt")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
AVAILABLE_NOW = "available-now"
OUTPUT_FORMATS = ("parquet", "json")
# Records per poll of Spark's Kafka consumers. Spark asks for one poll after another until a task's range is read;
# at Kafka's default of 500 the job read 10-20% slower (bench/test_spark_consume.py: the warm query at 500).
# A poll returns only what is fetched already, so memory stays bounded by the fetch sizes.
DEFAULT_MAX_POLL_RECORDS = 5000

_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|h)\s*$")
_UNITS = {"ms": "milliseconds", "s": "seconds", "m": "minutes", "h": "hours"}
_MILLIS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}


class ConfigError(ValueError):
    """An option or a mounted connection that cannot work; the message says what to change."""


@dataclass(frozen=True)
class Duration:
    """A duration as the job's options spell it (500ms, 10s, 1m, 2h)."""

    amount: int
    unit: str

    @classmethod
    def parse(cls, text: str) -> Duration:
        match = _DURATION.match(text)
        if not match:
            raise ConfigError(f"{text!r} is not a duration: write a whole number and ms, s, m or h (e.g. 30s, 1m)")
        amount, unit = int(match.group(1)), match.group(2)
        if amount <= 0:
            raise ConfigError(f"{text!r}: a duration must be positive")
        return cls(amount, unit)

    @property
    def spark_interval(self) -> str:
        """The interval string Spark's window(), withWatermark() and triggers take."""
        return f"{self.amount} {_UNITS[self.unit]}"

    @property
    def millis(self) -> int:
        return self.amount * _MILLIS[self.unit]

    def __str__(self) -> str:
        return f"{self.amount}{self.unit}"


@dataclass(frozen=True)
class ScramCredential:
    """A SCRAM-SHA-512 KafkaUser: its name and password (never printed)."""

    username: str
    password: str = field(repr=False)
    jaas: str = field(repr=False)  # the JAAS line Java clients take

    def java(self) -> dict[str, str]:
        return {"sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": self.jaas}

    def librdkafka(self) -> dict[str, str]:
        return {"sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": self.username, "sasl.password": self.password}


@dataclass(frozen=True)
class CertificateCredential:
    """A TLS KafkaUser: its client certificate and key, PEM (never printed)."""

    certificate: str = field(repr=False)
    key: str = field(repr=False)

    def java(self) -> dict[str, str]:
        # (inline PEM: executors need no file of it)
        return {"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": self.certificate,
                "ssl.keystore.key": self.key}

    def librdkafka(self) -> dict[str, str]:
        return {"ssl.certificate.pem": self.certificate, "ssl.key.pem": self.key}


@dataclass(frozen=True)
class KafkaConnection:
    bootstrap_servers: str
    security_protocol: str = "PLAINTEXT"
    ca_file: str | None = None  # PEM certificates to trust, for TLS
    credential: ScramCredential | CertificateCredential | None = None  # the KafkaUser the job runs as

    def spark_options(self) -> dict[str, str]:
        """Options for Spark's Kafka source and sink (Kafka client properties prefixed with `kafka.`)."""
        options = {"bootstrap.servers": self.bootstrap_servers, "security.protocol": self.security_protocol}
        if self.ca_file:
            options |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": self.ca_file}
        if self.credential is not None:
            options |= self.credential.java()
        return {f"kafka.{key}": value for key, value in options.items()}

    def client_config(self) -> dict[str, str]:
        """Properties for a librdkafka (confluent-kafka) client."""
        config = {"bootstrap.servers": self.bootstrap_servers, "security.protocol": self.security_protocol}
        if self.ca_file:
            config["ssl.ca.location"] = self.ca_file
        if self.credential is not None:
            config |= self.credential.librdkafka()
        return config


@dataclass(frozen=True)
class JobOptions:
    job_name: str
    kafka: KafkaConnection
    input_topics: tuple[str, ...]
    checkpoint: str
    output_path: str | None = None
    output_topic: str | None = None
    output_format: str = "parquet"
    trigger: Duration | None = field(default_factory=lambda: Duration(10, "s"))
    window: Duration = field(default_factory=lambda: Duration(1, "m"))
    watermark: Duration = field(default_factory=lambda: Duration(2, "m"))
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    max_poll_records: int = DEFAULT_MAX_POLL_RECORDS
    lag_group: str = ""

    @property
    def available_now(self) -> bool:
        """None as trigger means: process what is there now, then stop (Trigger.AvailableNow)."""
        return self.trigger is None

    @property
    def sink(self) -> str:
        return "files" if self.output_path else "kafka"


def read_connection_dir(directory: Path, keys: Sequence[str] = CONNECTION_KEYS) -> dict[str, str]:
    """The known keys of a mounted ConfigMap or Secret; {} when the directory does not exist.

    Kubernetes mounts one file per key plus hidden `..data` links; only the
    documented keys are read, whitespace around values is dropped.
    """
    if not directory.is_dir():
        return {}
    found = {}
    for key in keys:
        path = directory / key
        if path.is_file():
            value = path.read_text().strip()
            if value:
                found[key] = value
    return found


def user_credential(user: Mapping[str, str], directory: Path) -> ScramCredential | CertificateCredential | None:
    """The credential in a mounted KafkaUser Secret (`user`: its keys), None when none is mounted."""
    if "password" in user:
        if "username" not in user or "sasl.jaas.config" not in user:
            raise ConfigError(f"{directory} holds a password but no username or sasl.jaas.config: mount the whole "
                              "Secret of a KafkaUser with authentication scram-sha-512")
        return ScramCredential(user["username"], user["password"], user["sasl.jaas.config"])
    if "tls.crt" in user or "tls.key" in user:
        if not {"tls.crt", "tls.key"} <= user.keys():
            raise ConfigError(f"{directory} holds only one of tls.crt and tls.key: mount the whole Secret of a "
                              "KafkaUser with authentication tls")
        return CertificateCredential(user["tls.crt"], user["tls.key"])
    return None


def resolve_connection(mounted: Mapping[str, str], bootstrap_servers: str | None,
                       security_protocol: str | None, connection_dir: Path,
                       ca_file: Path | None = None) -> KafkaConnection:
    """Command-line values override the mounted ConfigMap; a bootstrap address is required, and for TLS
    the CA certificates to trust (`ca_file`: the one named, or the mounted Secret's when it is there)."""
    servers = bootstrap_servers or mounted.get("bootstrap.servers")
    if not servers:
        where = (f"{connection_dir} has no bootstrap.servers file" if connection_dir.is_dir()
                 else f"{connection_dir} does not exist")
        raise ConfigError(
            "no Kafka bootstrap address: pass --bootstrap-servers HOST:PORT, or mount the KafkaCluster's "
            f"<cluster>-kafka-connection ConfigMap at {connection_dir} (--connection-dir); {where}")
    protocol = (security_protocol or mounted.get("security.protocol") or "PLAINTEXT").strip().upper()
    if protocol not in TLS_PROTOCOLS:
        return KafkaConnection(servers.strip(), protocol)
    if ca_file is None:
        secret = mounted.get("ssl.truststore.secret", "<cluster>-cluster-ca-cert")
        raise ConfigError(
            f"security.protocol {protocol} needs the CA certificates to trust: mount the Secret {secret} at "
            f"{DEFAULT_CA_FILE.parent} (its key ca.crt), or pass --ca-file PEM-FILE")
    return KafkaConnection(servers.strip(), protocol, str(ca_file))


def default_lag_group(job_name: str) -> str:
    return f"spark-{job_name}"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="krafty_spark",
        description="Page views per page per event-time window, from Kafka, with Spark Structured Streaming.")
    p.add_argument("--job-name", default="pageviews",
                   help="query and application name; the lag group defaults to spark-<job-name>")
    kafka = p.add_argument_group("Kafka connection (overrides the mounted ConfigMap)")
    kafka.add_argument("--connection-dir", type=Path, default=DEFAULT_CONNECTION_DIR,
                       help="the <cluster>-kafka-connection ConfigMap mounted as a directory")
    kafka.add_argument("--bootstrap-servers")
    kafka.add_argument("--security-protocol", choices=["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"])
    kafka.add_argument("--ca-file", type=Path,
                       help=f"PEM certificates to trust over TLS (default: {DEFAULT_CA_FILE}, when mounted)")
    kafka.add_argument("--user-dir", type=Path, default=DEFAULT_USER_DIR,
                       help="the Secret of the KafkaUser the job runs as, mounted as a directory (when it is there, "
                            "its listener's address and protocol replace the ConfigMap's)")
    io = p.add_argument_group("input and output")
    io.add_argument("--input-topics", required=True, help="comma-separated topics of page-view events (JSON)")
    io.add_argument("--starting-offsets", choices=["earliest", "latest"], default="earliest",
                    help="where a new checkpoint starts reading; a restart always resumes from the checkpoint")
    io.add_argument("--max-offsets-per-trigger", type=int, help="cap on records per micro-batch")
    io.add_argument("--max-poll-records", type=int, default=DEFAULT_MAX_POLL_RECORDS,
                    help="records each poll of Spark's Kafka consumers returns at most (Kafka's default: 500)")
    sink = io.add_mutually_exclusive_group(required=True)
    sink.add_argument("--output-path", help="directory for results as files (exactly-once)")
    sink.add_argument("--output-topic", help="Kafka topic for results (at-least-once, last value per key is right)")
    io.add_argument("--output-format", choices=OUTPUT_FORMATS, default="parquet", help="file format of --output-path")
    io.add_argument("--checkpoint", required=True, help="checkpoint directory (a volume in Kubernetes)")
    timing = p.add_argument_group("timing")
    timing.add_argument("--trigger", default="10s",
                        help=f"micro-batch interval (e.g. 10s), or {AVAILABLE_NOW} to process what is there and stop")
    timing.add_argument("--window", default="1m", help="event-time window length")
    timing.add_argument("--watermark", default="2m", help="how late an event may be before its window is final")
    p.add_argument("--lag-group", help="consumer group that shows the job's lag (default spark-<job-name>)")
    return p


_NEEDS = {ScramCredential: ("SASL_SSL", "SASL_PLAINTEXT"), CertificateCredential: ("SSL",)}


def _connection(args: argparse.Namespace, mounted: Mapping[str, str], user: Mapping[str, str],
                default_ca: Path) -> KafkaConnection:
    """The connection: the command line first, then the KafkaUser's Secret, then the cluster's ConfigMap."""
    if args.ca_file is not None and not args.ca_file.is_file():
        raise ConfigError(f"--ca-file {args.ca_file} is not a file")
    user_ca = args.user_dir / "ca.crt" if "ca.crt" in user else None
    ca_file = args.ca_file or (default_ca if default_ca.is_file() else user_ca)
    listener = {key: user[key] for key in ("bootstrap.servers", "security.protocol") if key in user}
    connection = resolve_connection({**mounted, **listener}, args.bootstrap_servers, args.security_protocol,
                                    args.connection_dir, ca_file)
    credential = user_credential(user, args.user_dir)
    if credential is not None and connection.security_protocol not in _NEEDS[type(credential)]:
        raise ConfigError(f"the KafkaUser in {args.user_dir} authenticates with "
                          f"{'SCRAM' if isinstance(credential, ScramCredential) else 'a certificate'}, which "
                          f"security.protocol {connection.security_protocol} cannot carry: use "
                          f"{' or '.join(_NEEDS[type(credential)])}")
    return replace(connection, credential=credential)


def parse_args(argv: Sequence[str], mounted: Mapping[str, str] | None = None,
               default_ca: Path = DEFAULT_CA_FILE, user: Mapping[str, str] | None = None) -> JobOptions:
    """Parses the command line; `mounted` and `user` (for tests) replace reading --connection-dir and
    --user-dir."""
    args = _parser().parse_args(list(argv))
    if mounted is None:
        mounted = read_connection_dir(args.connection_dir)
    if user is None:
        user = read_connection_dir(args.user_dir, USER_KEYS)
    connection = _connection(args, mounted, user, default_ca)
    topics = tuple(t.strip() for t in args.input_topics.split(",") if t.strip())
    if not topics:
        raise ConfigError("--input-topics names no topic")
    if args.max_offsets_per_trigger is not None and args.max_offsets_per_trigger < 1:
        raise ConfigError("--max-offsets-per-trigger must be at least 1")
    if args.max_poll_records < 1:
        raise ConfigError("--max-poll-records must be at least 1")
    if args.output_topic and args.output_topic in topics:
        raise ConfigError(f"--output-topic {args.output_topic} is also an input topic")
    trigger = None if args.trigger == AVAILABLE_NOW else Duration.parse(args.trigger)
    return JobOptions(
        job_name=args.job_name, kafka=connection, input_topics=topics, checkpoint=args.checkpoint,
        output_path=args.output_path, output_topic=args.output_topic, output_format=args.output_format,
        trigger=trigger, window=Duration.parse(args.window), watermark=Duration.parse(args.watermark),
        starting_offsets=args.starting_offsets, max_offsets_per_trigger=args.max_offsets_per_trigger,
        max_poll_records=args.max_poll_records, lag_group=args.lag_group or default_lag_group(args.job_name))
