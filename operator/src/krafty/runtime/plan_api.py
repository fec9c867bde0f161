"""The operator's plan endpoint, which `kubectl krafty plan` asks through `kubectl port-forward`.

    POST /namespaces/NS/kafkaclusters/NAME/plan   body: a KafkaCluster (or only its spec) as JSON
    -> 200 the preview (krafty.planning.preview.Preview.as_json), 404 no such cluster, 400 not a spec,
       503 the preview could not be made (Kafka or the API server did not answer), each with a message

It changes nothing: the cluster pass's own steps, reading only, with the children applied as a dry run.
It listens on the pod's loopback address only: no other pod can reach it, only whoever may port-forward to the
operator's pods (the pods/portforward right in its namespace, which Kubernetes' RBAC grants). Its answers hold
what that right already shows (the operator's view of every cluster it operates). Every replica answers, the
standby too.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

from krafty import naming
from krafty.clients.errors import KafkaUnavailable
from krafty.clients.kube import API_ERRORS, Kube
from krafty.planning.preview import Preview
from krafty.runtime import serving
from krafty.wire import KafkaProtocolError

log = logging.getLogger(__name__)

PATH = re.compile(r"^/namespaces/([a-z0-9-]{1,63})/kafkaclusters/([a-z0-9.-]{1,253})/plan$")
MAX_BODY = 1 << 20
ADDRESS = "127.0.0.1"  # (the pod's loopback: port-forward reaches it, other pods do not)

Previewer = Callable[[dict[str, Any], Mapping[str, Any]], Preview]


def _spec_of(document: Any) -> Mapping[str, Any]:
    """The spec of a KafkaCluster document (kind may be left out), or the document itself when it is a spec."""
    if not isinstance(document, dict):
        raise ValueError("the body is not a JSON object")
    if document.get("kind", naming.CLUSTER_KIND) != naming.CLUSTER_KIND:
        raise ValueError(f"a {document['kind']} is not a {naming.CLUSTER_KIND}")
    if "kind" not in document and "spec" not in document:
        return document
    spec = document.get("spec")
    if not isinstance(spec, dict):
        raise ValueError(f"the {naming.CLUSTER_KIND} has no spec")
    return spec


class _PlanServer(serving.Bounded, HTTPServer):
    pass


def serve(port: int, kube: Kube, previewer: Previewer) -> HTTPServer:
    """Starts the endpoint on its own threads; returns the server (serving.stop stops it)."""

    class Handler(BaseHTTPRequestHandler):
        timeout = serving.CLIENT_SECONDS

        def do_POST(self) -> None:
            match = PATH.match(self.path.split("?", 1)[0])
            if match is None:
                return self._answer(404, {"message": f"no such endpoint: {self.path}"})
            namespace, name = match.groups()
            length = int(self.headers.get("Content-Length") or 0)
            if not 0 < length <= MAX_BODY:
                return self._answer(400, {"message": f"send a KafkaCluster or its spec as JSON (up to {MAX_BODY} "
                                                     "bytes)"})
            try:
                spec = _spec_of(json.loads(self.rfile.read(length)))
            except ValueError as error:
                return self._answer(400, {"message": f"not a KafkaCluster spec: {error}"})
            try:
                body = kube.get(naming.CLUSTER_KIND, name, namespace)
                if body is None:
                    return self._answer(404, {"message": f"no {naming.CLUSTER_KIND} {namespace}/{name}"})
                preview = previewer(body, spec)
            except (*API_ERRORS, KafkaUnavailable, KafkaProtocolError) as error:
                log.warning("plan preview of %s/%s failed: %s", namespace, name, error)
                return self._answer(503, {"message": f"the preview could not be made: {error}"})
            log.info("plan preview of %s/%s: %s", namespace, name, preview.verdict.value)
            return self._answer(200, preview.as_json())

        def _answer(self, code: int, payload: Mapping[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug(format, *args)

    server = _PlanServer((ADDRESS, port), Handler)
    serving.start(server, "plan-api")
    return server
