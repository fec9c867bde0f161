"""A TCP proxy in front of one Kafka listener, for what a real broker cannot be made to do on cue: close a
client's connections from its side (as a restart or its idle timeout does), hang up on a request, take a kind
of request and never answer it (a controller stuck behind a broker that forwards to it), or send answers whose
length prefix claims more than any real answer (a broken or hostile server). It also counts the requests that
pass, by kind: what a client asked a real broker, call by call."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections import Counter

OVERSTATED = 2**31 - 1  # the largest length a frame's prefix can claim

class KafkaProxy:
    """Counts the connections it accepts and the requests it passes on; requests and answers pass whole, a frame at
    a time."""

    def __init__(self, port: int, host: str = "127.0.0.1", listen: tuple[str, int] = ("127.0.0.1", 0)) -> None:
        self.server = socket.create_server(listen)
        self.port = int(self.server.getsockname()[1])
        self.address = f"{listen[0]}:{self.port}"
        self.accepted = 0
        self._target = (host, port)
        self._open: list[socket.socket] = []
        self._hang_up = threading.Event()
        self._overstated = threading.Event()
        self._lock = threading.Lock()
        self._unanswered: dict[int, int] = {}  # api key -> how many more such requests to swallow
        self._passed: Counter[int] = Counter()  # api key -> requests passed on
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            broker = socket.create_connection(self._target)
            self.accepted += 1
            self._open += [client, broker]
            threading.Thread(target=self._requests, args=(client, broker), daemon=True).start()
            threading.Thread(target=self._answers, args=(broker, client), daemon=True).start()

    def _requests(self, client: socket.socket, broker: socket.socket) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while True:
                size = _exactly(client, 4)
                frame = size + _exactly(client, struct.unpack(">i", size)[0])
                if self._hang_up.is_set():
                    self._hang_up.clear()
                    break
                api_key = struct.unpack(">h", frame[4:6])[0]
                if not self._swallowed(api_key):
                    with self._lock:
                        self._passed[api_key] += 1
                    broker.sendall(frame)
        _shut(client, broker)

    def _answers(self, broker: socket.socket, client: socket.socket) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while True:
                size = _exactly(broker, 4)
                body = _exactly(broker, struct.unpack(">i", size)[0])
                client.sendall((struct.pack(">i", OVERSTATED) if self._overstated.is_set() else size) + body)
        _shut(broker, client)

    def _swallowed(self, api_key: int) -> bool:
        with self._lock:
            left = self._unanswered.get(api_key, 0)
            if left:
                self._unanswered[api_key] = left - 1
            return bool(left)

    def requests(self) -> Counter[int]:
        """The requests passed on so far, by api key."""
        with self._lock:
            return Counter(self._passed)

    def close_connections(self) -> None:
        """Closes every connection from the broker's side."""
        for sock in self._open:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._open.clear()

    def hang_up_on_next_request(self) -> None:
        self._hang_up.set()

    def leave_unanswered(self, api_key: int, times: int = 1) -> None:
        """The next `times` requests of this kind are taken and never passed on: their answer never comes."""
        with self._lock:
            self._unanswered[api_key] = self._unanswered.get(api_key, 0) + times

    def overstate_answers(self, overstated: bool = True) -> None:
        """While on, each answer's length prefix says OVERSTATED bytes, whatever follows."""
        if overstated:
            self._overstated.set()
        else:
            self._overstated.clear()

    def close(self) -> None:
        self.server.close()
        self.close_connections()


def _exactly(sock: socket.socket, n: int) -> bytes:
    chunks = b""
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise ConnectionError("closed")
        chunks += chunk
    return chunks


def _shut(*socks: socket.socket) -> None:
    for sock in socks:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
