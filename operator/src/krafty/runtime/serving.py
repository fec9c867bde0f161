"""The operator's own HTTP endpoints (Prometheus /metrics, the plan API), each served on its own thread.

socketserver's serve_forever wakes every poll interval only to look for a shutdown: twice a second by default, a
seventh of an idle operator's CPU with two endpoints. Here it looks once a minute, and stop() wakes it at once
with a connection of its own.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

import prometheus_client

POLL_SECONDS = 60.0


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # (a line on stderr for every scrape otherwise)
        pass


class _MetricsServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


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
