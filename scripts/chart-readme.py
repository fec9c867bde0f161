"""Writes charts/krafty-operator/README.md from the `## @section` and `## @param` comments of values.yaml.

`python scripts/chart-readme.py` rewrites it; `--check` fails when it is out of date (the chart tests run that).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[1] / "charts" / "krafty-operator"
HEAD = """# krafty-operator

Runs Apache Kafka on Kubernetes: KRaft clusters, topics and users as resources, safe rolling restarts,
TLS, authentication and ACLs, metrics and alerts. See the project README for what each resource does.

```
kubectl apply --server-side -f charts/krafty-operator/crds
helm install krafty charts/krafty-operator --namespace krafty-system --create-namespace
```

## Who can do what

- **The operator**, with `watchNamespaces` empty (all namespaces): one ClusterRole with exactly the verbs it uses,
  among them creating pods, StatefulSets, Services and Secrets and reading Secrets in every namespace. Whoever can
  run code in its pods (edit its Deployment, or exec into them) holds those rights. With `watchNamespaces`: a Role
  in each of those namespaces, and cluster-wide reads only (CRDs, namespaces, StorageClasses, nodes).
- **A namespace's users** (`tenantRoles.aggregate`): Kubernetes' `edit` and `admin` make and change KafkaClusters,
  Topics, KafkaUsers and KafkaClusterPlans there, `view` reads them; a plan only of a cluster they may update.
- **What the operator guarantees between namespaces**: a tenant's input (its specs and the Secrets they name)
  cannot stall it, read or change another namespace's objects, take over an object it did not make, or make a
  cluster's nodes trust its certificates; what cannot work is held with a condition naming it. New clusters admit
  only their own namespace's pods on their listeners. `clusterPolicy` makes the API server refuse clusters without
  TLS, authentication or authorization. The whole threat model: docs/guides/security.md.

This page is generated from `values.yaml` (`python scripts/chart-readme.py`); `values.schema.json` refuses
values it does not know.
"""


def _default(values: dict[str, Any], path: str) -> str:
    node: Any = values
    for part in path.split("."):
        node = node[part]
    return f"`{json.dumps(node)}`"


def render() -> str:
    text = (CHART / "values.yaml").read_text()
    values = yaml.safe_load(text)
    out = [HEAD]
    for line in text.splitlines():
        if section := re.match(r"^## @section (.+)", line):
            out += [f"\n## {section.group(1)}\n", "| Value | What it does | Default |", "| --- | --- | --- |"]
        elif param := re.match(r"^## @param (\S+) (.+)", line):
            description = param.group(2).replace("|", "\\|")
            out.append(f"| `{param.group(1)}` | {description} | {_default(values, param.group(1))} |")
    return "\n".join(out) + "\n"


def main() -> int:
    readme = CHART / "README.md"
    if sys.argv[1:] == ["--check"]:
        if not readme.exists() or readme.read_text() != render():
            print(f"{readme} is out of date: run python scripts/chart-readme.py", file=sys.stderr)
            return 1
        return 0
    readme.write_text(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
