"""The operator's entry point: `krafty-operator [--namespace NS ...]`.

All kopf settings live in the @kopf.on.startup handler (krafty.runtime.handlers), so
`kopf run -m krafty.runtime.handlers` and this script behave the same.
"""

from __future__ import annotations

import argparse

import kopf

from krafty.runtime import handlers, serving
from krafty.runtime.settings import OperatorSettings
from krafty.telemetry import logs


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="krafty-operator", description=__doc__)
    parser.add_argument("--namespace", action="append", default=[],
                        help="namespace to watch (repeat for several); all namespaces when omitted")
    parser.add_argument("--metrics-port", type=int, default=8080, help="port of the Prometheus /metrics endpoint")
    parser.add_argument("--health-port", type=int, default=8081, help="port of the liveness endpoint /healthz")
    parser.add_argument("--log-format", choices=("text", "json"), default="text",
                        help="json: one object per line, each decision with its cluster, node and reason as fields")
    parser.add_argument("--verbose", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    namespaces = args.namespace or list(OperatorSettings.from_environment().watch_namespaces)
    logs.configure(json_lines=args.log_format == "json", verbose=args.verbose)
    serving.metrics(args.metrics_port)
    assert handlers.configure  # the handlers register themselves on import
    kopf.run(standalone=True, clusterwide=not namespaces, namespaces=namespaces,
             liveness_endpoint=f"http://0.0.0.0:{args.health_port}/healthz")


if __name__ == "__main__":
    main()
