"""Generate kubelab/schema/kubernetes.json: the field names and types of the Kubernetes API kinds kubelab
serves, read from the official `kubernetes` Python client's generated models (themselves generated from
Kubernetes' OpenAPI spec). The API server uses it for fieldValidation=Strict: `unknown field "spec.foo"`.

    .venv/bin/python scripts/gen_schema.py
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import kubernetes
from kubernetes import client

ROOTS = {
    "v1/Namespace": "V1Namespace", "v1/Node": "V1Node", "v1/Pod": "V1Pod", "v1/Service": "V1Service",
    "v1/Endpoints": "V1Endpoints", "v1/Event": "CoreV1Event", "v1/Binding": "V1Binding",
    "v1/ConfigMap": "V1ConfigMap", "v1/Secret": "V1Secret", "v1/ServiceAccount": "V1ServiceAccount",
    "discovery.k8s.io/v1/EndpointSlice": "V1EndpointSlice", "coordination.k8s.io/v1/Lease": "V1Lease",
    "apps/v1/Deployment": "V1Deployment", "apps/v1/ReplicaSet": "V1ReplicaSet", "autoscaling/v1/Scale": "V1Scale",
    "meta/v1/DeleteOptions": "V1DeleteOptions",
}
PRIMITIVES = {"str": "string", "int": "integer", "bool": "boolean", "float": "number", "datetime": "string",
              "date": "string", "object": "any", "bytearray": "string", "bytes": "string",
              "Any": "any"}


def describe(type_name: str, types: dict[str, Any]) -> Any:
    """A type as JSON: "string", ["list", T], ["map", T], or the name of an object in `types`."""
    type_name = type_name.strip()
    match = re.fullmatch(r"(?:list|List)\[(.+)\]", type_name)
    if match:
        return ["list", describe(match.group(1), types)]
    match = re.fullmatch(r"(?:dict|Dict)\((?:str|str), (.+)\)|(?:dict|Dict)\[str, (.+)\]", type_name)
    if match:
        return ["map", describe(match.group(1) or match.group(2), types)]
    if type_name in PRIMITIVES:
        return PRIMITIVES[type_name]
    model = getattr(client, type_name)
    if type_name not in types:
        types[type_name] = {}  # placeholder against recursion (JSONSchemaProps refers to itself)
        types[type_name] = {model.attribute_map[attr]: describe(kind, types)
                            for attr, kind in model.openapi_types.items()}
    return type_name


def main() -> None:
    types: dict[str, Any] = {}
    roots = {gvk: describe(model, types) for gvk, model in ROOTS.items()}
    out = {"generatedFrom": f"kubernetes Python client {kubernetes.__version__}", "roots": roots, "types": types}
    path = Path(__file__).resolve().parents[1] / "kubelab" / "schema" / "kubernetes.json"
    path.write_text(json.dumps(out, sort_keys=True, separators=(",", ":")) + "\n")
    print(f"{path}: {len(types)} types")


if __name__ == "__main__":
    main()
