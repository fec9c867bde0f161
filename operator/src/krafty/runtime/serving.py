"""The operator's own HTTP endpoint (Prometheus /metrics), served on its own thread.

socketserver's serve_forever wakes every poll interval only to look for a shutdown: twice a second by default (a
seventh of an idle operator's CPU, measured when it served two endpoints). Here it looks once a minute, and stop()
wakes it at once with a connection of its own.

Any pod the NetworkPolicy lets in may open a connection to it, so it lets no client hold it: a client that sends
nothing or reads nothing for CLIENT_SECONDS is hung up on, and past MAX_CONNECTIONS at once from one address a new
one is closed at once (a thread each, up to then), leaving the Lease's renewal and the passes their CPU.
"""

from __future__ import annotations

import collections
import contextlib
import socket
import socketserver
import threading
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

import prometheus_client

POLL_SECONDS = 60.0
CLIENT_SECONDS = 10.0
MAX_CONNECTIONS = 8


class Bounded(socketserver.ThreadingMixIn):
    """A thread per connection, up to MAX_CONNECTIONS at once from one address (a pod that holds its share
    leaves Prometheus and `kubectl krafty status` theirs); those past it are closed unanswered."""

    daemon_threads = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.held: collections.Counter[str] = collections.Counter()
        self.held_lock = threading.Lock()

    def _take(self, address: str) -> bool:
        with self.held_lock:
            if self.held[address] >= MAX_CONNECTIONS:
                return False
            self.held[address] += 1
            return True

    def _give_back(self, address: str) -> None:
        with self.held_lock:
            self.held[address] -= 1
            if not self.held[address]:
                del self.held[address]

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._take(client_address[0]):
            self.shutdown_request(request)  # type: ignore[attr-defined]
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._give_back(client_address[0])
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._give_back(client_address[0])


class _QuietHandler(WSGIRequestHandler):
    timeout = CLIENT_SECONDS

    def log_message(self, format: str, *args: Any) -> None:  # (a line on stderr for every scrape otherwise)
        pass


class _MetricsServer(Bounded, WSGIServer):
    pass


def start(server: socketserver.TCPServer, name: str) -> None:
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": POLL_SECONDS}, name=name,
                     daemon=True).start()


def stop(server: socketserver.TCPServer) -> None:
    """Stops serving without waiting out a poll interval, and closes the listening socket."""
    port = server.server_address[1]
    stopping = threading.Thread(target=server.shutdown, daemon=True)
    stopping.start()
    while stopping.is_alive():
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        stopping.join(0.05)
    server.server_close()


def metrics(port: int) -> WSGIServer:
    """Prometheus /metrics on this port, as prometheus_client.start_http_server serves it."""
    server = _MetricsServer(("0.0.0.0", port), _QuietHandler)
    server.set_app(prometheus_client.make_wsgi_app())
    start(server, "metrics")
    return server
