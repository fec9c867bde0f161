"""How the operator's own clients reach a cluster: the addresses and, for a TLS cluster, what to trust and
the client certificate to present. The librdkafka clients and the KRaft wire client read the same value."""

from __future__ import annotations

import functools
import os
import ssl
import tempfile
from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class TlsIdentity:
    ca: str  # PEM: the CAs the operator trusts (the cluster's trust bundle)
    cert: str  # PEM: the operator's client certificate
    key: str = field(repr=False)  # PEM: its private key, never printed


@dataclass(frozen=True)
class Connection:
    servers: str  # host:port,...
    tls: TlsIdentity | None = None

    def to(self, servers: str) -> Connection:
        """The same credentials, other servers (the controllers rather than the brokers)."""
        return replace(self, servers=servers)

    def librdkafka(self) -> dict[str, str]:
        """The security settings of an Admin client or consumer (librdkafka takes PEM text directly)."""
        if self.tls is None:
            return {}
        return {"security.protocol": "SSL", "ssl.ca.pem": self.tls.ca, "ssl.certificate.pem": self.tls.cert,
                "ssl.key.pem": self.tls.key}

    def ssl_context(self) -> ssl.SSLContext | None:
        return None if self.tls is None else _context(self.tls)


@functools.lru_cache(maxsize=64)
def _context(tls: TlsIdentity) -> ssl.SSLContext:
    """A client context that verifies the server's name and chain and presents the operator's certificate.
    Python's ssl loads a certificate and key from files only: they are written to a private directory,
    loaded and removed at once."""
    context = ssl.create_default_context(cadata=tls.ca)
    with tempfile.TemporaryDirectory(prefix="krafty-tls-") as folder:
        cert, key = os.path.join(folder, "tls.crt"), os.path.join(folder, "tls.key")
        for path, text in ((cert, tls.cert), (key, tls.key)):
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "w") as out:
                out.write(text)
        context.load_cert_chain(cert, key)
    return context
