"""Traffic for end-to-end tests, from inside the Kubernetes cluster.

  traffic_cli.py idle                      keep the pod alive (tests exec the commands below)
  traffic_cli.py --ca FILE COMMAND ...     any command below over TLS, trusting the CAs in FILE
  traffic_cli.py --scram USER:PASSWORD COMMAND ...
        any command below with SASL SCRAM-SHA-512 (with --ca: over TLS)
  traffic_cli.py --ca FILE --cert CERT:KEY COMMAND ...
        any command below over TLS, presenting the client certificate in CERT (its key in KEY)
  traffic_cli.py produce BOOTSTRAP TOPIC --rate R [--count N | --until-file F] --acked FILE
                        [--keys K] [--size B] [--outcomes CSV]
        writes keyed sequences over K keys with acks=all and idempotence (values padded to B bytes);
        prints a JSON report (acknowledged, failed by error, longest gap between acknowledgements),
        keeps the acknowledged (key, sequence) pairs in FILE and each record's outcome in CSV
        (sent at, epoch ms; milliseconds to its outcome; 1 if acknowledged, 0 if failed)
  traffic_cli.py partitions BOOTSTRAP TOPIC
        prints the partitions a consumer sees: {"partitions": N}
  traffic_cli.py consume BOOTSTRAP TOPIC --group G [--idle S]
        reads with a consumer group, committing, until nothing new arrives for S seconds, or until
        Kafka refuses it; prints {"consumed": N, "error": the refusal's name or null}
  traffic_cli.py follow BOOTSTRAP TOPIC --group G --until-file F
        reads with a consumer group until F exists and nothing new arrived for 10 s;
        prints {"records": N}: the distinct (key, sequence) records it saw
  traffic_cli.py produce-lines BOOTSTRAP TOPIC [--key-field F] < LINES
        writes each stdin line as one record value (acks=all), keyed by the line's JSON field F if given
        (records of one key go to one partition; keys spread over them all); prints {"acked": N}
  traffic_cli.py blast BOOTSTRAP TOPIC --rate-mib R --warmup W --seconds S --size B
        offers B-byte records at R MiB/s; prints the rate acknowledged in the S seconds after W
  traffic_cli.py fill BOOTSTRAP TOPIC --mib M [--size B]
        writes M MiB of B-byte records of random bytes (incompressible) with acks=all, as fast as the
        brokers take them; prints {"records": N, "failed": N}
  traffic_cli.py last-values BOOTSTRAP TOPIC
        reads the whole topic; prints {"values": {key: last value}}
  traffic_cli.py watch-leader SERVERS --seconds S
        asks the metadata quorum for its leader every 100 ms for S seconds; prints the
        leaders seen and the longest time without one
  traffic_cli.py watch-preferred BOOTSTRAP --seconds S
        samples every 200 ms the share of partitions led by their preferred replica, until
        S seconds passed or the share dropped below 1 and has been back at 1 for 5 s;
        prints {"samples": [[epoch seconds, share], ...]} (only the changes)
  traffic_cli.py groups BOOTSTRAP TOPIC --count N --prefix P [--delete]
        gives N consumer groups P0..P(N-1) a committed offset of 0 on every partition of TOPIC (groups no
        consumer runs, as a busy cluster has many), or deletes them; prints {"groups": N done}
  traffic_cli.py watch-isr BOOTSTRAP TOPIC --min-isr N --until-file F
        samples the topic's partitions every 250 ms until F exists; prints {"samples": [[epoch seconds,
        partitions without a leader, partitions with fewer than N in-sync replicas], ...]} (only the changes;
        a sample no broker answered within 2 s is left out)
  traffic_cli.py verify BOOTSTRAP TOPIC --acked FILE
        reads the topic from the beginning and prints a JSON verification:
        lost, duplicated and out-of-order records against FILE
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from krafty_testkit import traffic


def produce(args: argparse.Namespace) -> dict[str, object]:
    offered: dict[str, float] = {}
    if args.count:
        report = traffic.produce_sequences(args.bootstrap, args.topic, args.count)
    else:
        producer = traffic.SteadyProducer(args.bootstrap, args.topic, rate=args.rate, keys=args.keys, size=args.size)
        producer.start()
        while not os.path.exists(args.until_file):
            time.sleep(0.2)
        report = producer.stop()
        offered = {"rate": args.rate, "seconds": round(producer.seconds, 1)}
    with open(args.acked, "w") as out:
        json.dump(report.acked, out)
    if args.outcomes:
        with open(args.outcomes, "w") as out:
            out.writelines(f"{sent * 1000:.0f},{took * 1000:.1f},{int(ok)}\n" for sent, took, ok in report.outcomes)
    return {"acked": len(report.acked), "failed": dict(report.failed), "longest_ack_gap_s": report.longest_ack_gap(),
            "longest_gaps": report.ack_gaps(3), **offered}


def verify(args: argparse.Namespace) -> dict[str, object]:
    with open(args.acked) as acked_file:
        acked = [tuple(pair) for pair in json.load(acked_file)]
    result = traffic.verify(acked, traffic.consume_all(args.bootstrap, args.topic, idle_seconds=args.idle))
    return {"acked": result.acked, "consumed": result.consumed, "lost": len(result.lost),
            "duplicated": len(result.duplicated), "out_of_order_keys": len(result.out_of_order),
            "examples": {"lost": result.lost[:5], "duplicated": result.duplicated[:5]}}


def partitions(args: argparse.Namespace) -> dict[str, object]:
    from confluent_kafka import Consumer

    consumer = Consumer(traffic.client_config(args.bootstrap, **{"group.id": "partition-count"}))
    try:
        metadata = consumer.list_topics(args.topic, timeout=30)
        return {"partitions": len(metadata.topics[args.topic].partitions)}
    finally:
        consumer.close()


def consume(args: argparse.Namespace) -> dict[str, object]:
    from confluent_kafka import Consumer

    consumer = Consumer(traffic.client_config(args.bootstrap, **{
        "group.id": args.group, "auto.offset.reset": "earliest", "enable.auto.commit": False}))
    consumer.subscribe([args.topic])
    consumed, last, began, error = 0, None, time.monotonic(), None
    try:
        while time.monotonic() - began < 300:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() and msg.error().name().endswith("AUTHORIZATION_FAILED"):
                error = msg.error().name()  # refused: it will not change by waiting
                break
            if msg is not None and not msg.error():
                consumed += 1
                last = time.monotonic()
            elif last is not None and time.monotonic() - last >= args.idle:
                break
        if consumed:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return {"consumed": consumed, "error": error}


def follow(args: argparse.Namespace) -> dict[str, object]:
    from confluent_kafka import Consumer

    consumer = Consumer(traffic.client_config(args.bootstrap, **{
        "group.id": args.group, "auto.offset.reset": "earliest"}))
    consumer.subscribe([args.topic])
    seen: set[tuple[bytes, bytes]] = set()
    last = time.monotonic()
    try:
        while not (os.path.exists(args.until_file) and time.monotonic() - last >= 10):
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                seen.add((msg.key() or b"", msg.value() or b""))
                last = time.monotonic()
    finally:
        consumer.close()
    return {"records": len(seen)}


def produce_lines(args: argparse.Namespace) -> dict[str, object]:
    from confluent_kafka import Producer

    producer = Producer(traffic.durable_producer_config(args.bootstrap))
    acked: list[int] = []
    for line in sys.stdin.read().splitlines():
        key = str(json.loads(line)[args.key_field]).encode() if args.key_field else None
        producer.produce(args.topic, key=key, value=line.encode(),
                         on_delivery=lambda err, _m: acked.append(err is None))
        producer.poll(0)
    producer.flush(60)
    return {"acked": sum(acked), "failed": len(acked) - sum(acked)}


def blast(args: argparse.Namespace) -> dict[str, object]:
    """Offers records of `size` bytes at `rate_mib` MiB/s; the rate is what the brokers acknowledged in the
    `seconds` after a `warmup` (a quota shows as the broker holding back its answers; its first burst, which
    Kafka throttles afterwards, falls in the warm-up)."""
    from confluent_kafka import Producer

    # Requests of 64 KiB at most: Kafka meters a quota per request, and lets one in before it throttles, so with
    # librdkafka's 1 MB batches a throttled client overshoots its quota by a fifth (measured here)
    producer = Producer(traffic.client_config(args.bootstrap, **{"acks": "1", "linger.ms": 5, "batch.size": 65536}))
    value, offered, acked = b"x" * args.size, 0, 0
    began = time.monotonic()
    window = (began + args.warmup, began + args.warmup + args.seconds)

    def delivered(err: object, _msg: object) -> None:
        nonlocal acked
        acked += err is None and window[0] <= time.monotonic() < window[1]

    while time.monotonic() < window[1]:
        if offered * args.size > args.rate_mib * 2**20 * (time.monotonic() - began):
            producer.poll(0.01)  # ahead of the offered rate
            continue
        try:
            producer.produce(args.topic, value=value, on_delivery=delivered)
            offered += 1
        except BufferError:  # the local queue is full: wait for the brokers
            producer.poll(0.05)
        producer.poll(0)
    producer.purge()  # what is still queued is not counted: no need to wait for it
    producer.flush(10)
    return {"seconds": args.seconds, "bytes": acked * args.size,
            "mib_per_s": round(acked * args.size / args.seconds / 2**20, 3)}


def fill(args: argparse.Namespace) -> dict[str, object]:
    from confluent_kafka import Producer

    producer = Producer(traffic.client_config(args.bootstrap, **{"acks": "all", "linger.ms": 20}))
    value, count, failed = os.urandom(args.size), int(args.mib * 2**20 // args.size) + 1, 0

    def delivered(err: object, _msg: object) -> None:
        nonlocal failed
        failed += err is not None

    for _ in range(count):
        while True:
            try:
                producer.produce(args.topic, value=value, on_delivery=delivered)
                break
            except BufferError:  # the local queue is full: wait for the brokers
                producer.poll(0.05)
        producer.poll(0)
    producer.flush(300)
    return {"records": count, "failed": failed}


def last_values(args: argparse.Namespace) -> dict[str, object]:
    from confluent_kafka import Consumer

    consumer = Consumer(traffic.client_config(args.bootstrap, **{
        "group.id": f"last-values-{time.time_ns()}", "auto.offset.reset": "earliest", "enable.auto.commit": False}))
    consumer.subscribe([args.topic])
    values: dict[str, str] = {}
    last, began = time.monotonic(), time.monotonic()
    while time.monotonic() - last < 8 and time.monotonic() - began < 120:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            values[(msg.key() or b"").decode()] = (msg.value() or b"").decode()
            last = time.monotonic()
    consumer.close()
    return {"values": values}


def watch_leader(args: argparse.Namespace) -> dict[str, object]:
    from krafty.clients import kraft
    from krafty.clients.errors import KafkaUnavailable

    leaders: list[int] = []
    without, longest, began = None, 0.0, time.monotonic()
    while time.monotonic() - began < args.seconds:
        try:
            leader = kraft.describe_quorum(args.servers, timeout=2).leader_id
        except (KafkaUnavailable, RuntimeError):  # no controller answered, or one answered with an error
            leader = -1
        now = time.monotonic()
        if leader < 0:
            without = without if without is not None else now
            longest = max(longest, now - without)
        else:
            without = None
            if not leaders or leaders[-1] != leader:
                leaders.append(leader)
        time.sleep(0.1)
    return {"leaders": leaders, "longest_without_leader_s": round(longest, 2)}


def groups(args: argparse.Namespace) -> dict[str, object]:
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(traffic.client_config(args.bootstrap))
    ids = [f"{args.prefix}{i}" for i in range(args.count)]
    if args.delete:
        deleted = 0
        for future in admin.delete_consumer_groups(ids, request_timeout=60).values():
            try:
                future.result(timeout=90)
                deleted += 1
            except KafkaException as error:
                if error.args[0].code() != KafkaError.GROUP_ID_NOT_FOUND:  # gone already is deleted
                    raise
        return {"groups": deleted}
    metadata = admin.list_topics(args.topic, timeout=30)
    offsets = [TopicPartition(args.topic, p, 0) for p in sorted(metadata.topics[args.topic].partitions)]
    for group in ids:  # one group per request: what the Admin API takes
        for future in admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, offsets)]).values():
            future.result(timeout=60)
    return {"groups": len(ids)}


def preferred_share(admin: object) -> float:
    topics = admin.list_topics(timeout=10).topics.values()  # type: ignore[attr-defined]
    parts = [p for t in topics for p in t.partitions.values()]
    return sum(1 for p in parts if p.replicas and p.leader == p.replicas[0]) / max(1, len(parts))


def watch_preferred(args: argparse.Namespace) -> dict[str, object]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(traffic.client_config(args.bootstrap))
    samples: list[list[float]] = []
    began, dropped = time.monotonic(), False
    while time.monotonic() - began < args.seconds:
        try:
            share = round(preferred_share(admin), 4)
        except Exception:  # noqa: BLE001 - a failed look counts as nothing learned
            share = -1.0
        if not samples or samples[-1][1] != share:
            samples.append([time.time(), share])
        dropped = dropped or share < 1.0
        if dropped and share == 1.0 and time.time() - samples[-1][0] >= 5:
            break
        time.sleep(0.2)
    return {"samples": samples}


def watch_isr(args: argparse.Namespace) -> dict[str, object]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(traffic.client_config(args.bootstrap))
    samples: list[list[float]] = []
    while not os.path.exists(args.until_file):
        try:
            partitions = admin.list_topics(args.topic, timeout=2).topics[args.topic].partitions.values()
        except Exception:  # noqa: BLE001 - no answer in time: nothing learned
            partitions = None
        if partitions:
            state = [sum(1 for p in partitions if p.leader < 0),
                     sum(1 for p in partitions if len(p.isrs) < args.min_isr)]
            if not samples or samples[-1][1:] != state:
                samples.append([time.time(), *state])
        time.sleep(0.25)
    return {"samples": samples}


def _on_topic(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> argparse.ArgumentParser:
    """A command that takes BOOTSTRAP TOPIC."""
    command = sub.add_parser(name)
    command.add_argument("bootstrap")
    command.add_argument("topic")
    return command


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ca", help="speak TLS, trusting the CA certificates in this PEM file")
    parser.add_argument("--scram", help="USER:PASSWORD: authenticate with SASL SCRAM-SHA-512")
    parser.add_argument("--cert", help="CERT:KEY: PEM files of a client certificate to present (with --ca)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("idle")
    p = _on_topic(sub, "produce")
    p.add_argument("--rate", type=float, default=200)
    p.add_argument("--count", type=int, default=0)
    p.add_argument("--until-file", default="/tmp/stop")
    p.add_argument("--acked", required=True)
    p.add_argument("--keys", type=int, default=10)
    p.add_argument("--size", type=int, default=0)
    p.add_argument("--outcomes")
    wi = _on_topic(sub, "watch-isr")
    wi.add_argument("--min-isr", type=int, required=True)
    wi.add_argument("--until-file", required=True)
    v = _on_topic(sub, "verify")
    v.add_argument("--acked", required=True)
    v.add_argument("--idle", type=float, default=10)
    g = _on_topic(sub, "consume")
    g.add_argument("--group", required=True)
    g.add_argument("--idle", type=float, default=5)
    f = _on_topic(sub, "follow")
    f.add_argument("--group", required=True)
    f.add_argument("--until-file", required=True)
    b = _on_topic(sub, "blast")
    b.add_argument("--seconds", type=float, default=30)
    b.add_argument("--warmup", type=float, default=30)
    b.add_argument("--rate-mib", type=float, default=2)
    b.add_argument("--size", type=int, default=16384)
    fl = _on_topic(sub, "fill")
    fl.add_argument("--mib", type=float, required=True)
    fl.add_argument("--size", type=int, default=100_000)
    pl = _on_topic(sub, "produce-lines")
    pl.add_argument("--key-field")
    for name in ("last-values", "partitions"):
        _on_topic(sub, name)
    ql = sub.add_parser("watch-leader")
    ql.add_argument("servers")
    ql.add_argument("--seconds", type=float, default=30)
    gr = _on_topic(sub, "groups")
    gr.add_argument("--count", type=int, required=True)
    gr.add_argument("--prefix", required=True)
    gr.add_argument("--delete", action="store_true")
    wp = sub.add_parser("watch-preferred")
    wp.add_argument("bootstrap")
    wp.add_argument("--seconds", type=float, default=600)
    return parser


def main() -> int:
    args = _parser().parse_args()
    if args.ca:
        traffic.use_tls(args.ca)
    if args.cert:
        traffic.use_certificate(*args.cert.split(":", 1))
    if args.scram:
        traffic.use_scram(*args.scram.split(":", 1))
    if args.command == "idle":
        while True:
            time.sleep(3600)
    commands = {"produce": produce, "verify": verify, "partitions": partitions,
                "consume": consume, "produce-lines": produce_lines, "last-values": last_values,
                "watch-leader": watch_leader, "watch-preferred": watch_preferred, "follow": follow, "blast": blast,
                "groups": groups, "fill": fill, "watch-isr": watch_isr}
    result = commands[args.command](args)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
