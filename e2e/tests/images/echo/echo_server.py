"""A TCP echo server that tells who answered, and a client for it (standard library only).

  echo_server.py serve [--port 7000] [--data DIR] [--ignore-term]
      Answers each line with "<hostname> <line>". With --data it keeps DIR/heartbeat holding the
      current time (rewritten every 50 ms) and appends what happens to DIR/events ("sigterm",
      "started", and at start "last-heartbeat" with the time the previous process was last alive),
      so a test can see, after a pod is gone, when SIGTERM came and when the process was killed.
      With --ignore-term it logs SIGTERM and keeps running: only SIGKILL stops it.
  echo_server.py ask HOST PORT TEXT
      Connects, sends TEXT, prints the answer (exit 1 when it cannot).
  echo_server.py note EVENT --data DIR
      Appends EVENT with the current time to DIR/events (for lifecycle hooks such as preStop).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import socketserver
import sys
import threading
import time
from pathlib import Path


def record(data: Path | None, event: str) -> None:
    line = f"{event} {time.time():.3f} {socket.gethostname()}"
    print(line, flush=True)
    if data is not None:
        with open(data / "events", "a") as events:
            events.write(line + "\n")


def heartbeat(data: Path) -> None:
    beat, partial = data / "heartbeat", data / "heartbeat.partial"
    if beat.exists():
        with open(data / "events", "a") as events:
            events.write(f"last-heartbeat {beat.read_text().strip()} previous-process\n")
    while True:
        partial.write_text(f"{time.time():.3f}\n")
        os.replace(partial, beat)
        time.sleep(0.05)


class Echo(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        for line in self.rfile:
            self.wfile.write(f"{socket.gethostname()} {line.decode().strip()}\n".encode())


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


def serve(port: int, data: Path | None, ignore_term: bool) -> None:
    if data is not None:
        data.mkdir(parents=True, exist_ok=True)
        threading.Thread(target=heartbeat, args=(data,), daemon=True).start()

    def on_term(signum: int, frame: object) -> None:
        record(data, "sigterm")
        if not ignore_term:
            sys.exit(0)

    signal.signal(signal.SIGTERM, on_term)
    record(data, "started")
    with Server(("0.0.0.0", port), Echo) as server:
        server.serve_forever()


def ask(host: str, port: int, text: str) -> int:
    try:
        with socket.create_connection((host, port), timeout=5) as conn:
            conn.sendall(text.encode() + b"\n")
            print(conn.makefile().readline().strip())
    except OSError as error:
        print(f"cannot reach {host}:{port}: {error}", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    serve_cmd = commands.add_parser("serve")
    serve_cmd.add_argument("--port", type=int, default=7000)
    serve_cmd.add_argument("--data", type=Path)
    serve_cmd.add_argument("--ignore-term", action="store_true")
    ask_cmd = commands.add_parser("ask")
    ask_cmd.add_argument("host")
    ask_cmd.add_argument("port", type=int)
    ask_cmd.add_argument("text")
    note_cmd = commands.add_parser("note")
    note_cmd.add_argument("event")
    note_cmd.add_argument("--data", type=Path, required=True)
    args = parser.parse_args()
    if args.command == "serve":
        serve(args.port, args.data, args.ignore_term)
    elif args.command == "note":
        record(args.data, args.event)
    else:
        return ask(args.host, args.port, args.text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
