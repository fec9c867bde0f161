"""Traffic for end-to-end tests, from inside the Kubernetes cluster.

  traffic_cli.py idle                      keep the pod alive (tests exec the commands below)
  traffic_cli.py produce BOOTSTRAP TOPIC --rate R [--count N | --until-file F] --acked FILE
        writes keyed sequences with acks=all and idempotence; prints a JSON report
        (acknowledged, failed by error, longest gap between acknowledgements) and
        keeps the acknowledged (key, sequence) pairs in FILE
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
    if args.count:
        report = traffic.produce_sequences(args.bootstrap, args.topic, args.count)
    else:
        producer = traffic.SteadyProducer(args.bootstrap, args.topic, rate=args.rate)
        producer.start()
        while not os.path.exists(args.until_file):
            time.sleep(0.2)
        report = producer.stop()
    with open(args.acked, "w") as out:
        json.dump(report.acked, out)
    return {"acked": len(report.acked), "failed": dict(report.failed), "longest_ack_gap_s": report.longest_ack_gap(),
            "longest_gaps": report.ack_gaps(3)}


def verify(args: argparse.Namespace) -> dict[str, object]:
    with open(args.acked) as acked_file:
        acked = [tuple(pair) for pair in json.load(acked_file)]
    result = traffic.verify(acked, traffic.consume_all(args.bootstrap, args.topic, idle_seconds=args.idle))
    return {"acked": result.acked, "consumed": result.consumed, "lost": len(result.lost),
            "duplicated": len(result.duplicated), "out_of_order_keys": len(result.out_of_order),
            "examples": {"lost": result.lost[:5], "duplicated": result.duplicated[:5]}}


def main() -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("idle")
    p = sub.add_parser("produce")
    p.add_argument("bootstrap")
    p.add_argument("topic")
    p.add_argument("--rate", type=float, default=200)
    p.add_argument("--count", type=int, default=0)
    p.add_argument("--until-file", default="/tmp/stop")
    p.add_argument("--acked", required=True)
    v = sub.add_parser("verify")
    v.add_argument("bootstrap")
    v.add_argument("topic")
    v.add_argument("--acked", required=True)
    v.add_argument("--idle", type=float, default=10)
    args = parser.parse_args()
    if args.command == "idle":
        while True:
            time.sleep(3600)
    result = produce(args) if args.command == "produce" else verify(args)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
