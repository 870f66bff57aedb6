"""Custom-object creates/s against pod creates/s through the same `kubelab apiserver` (issue 23's benchmark).

A private etcd and the API server in its own process; one CustomResourceDefinition (a namespaced kind with a
structural schema, so each create is pruned, defaulted and validated, and whose `env` is a keyed list the
field manager tracks item by item), served as v1 (storage) and v1beta1; then N pods, N custom objects
through v1 and N through v1beta1 (stored as v1 through the conversion layer) created in turn in rounds of
500 at the same concurrency, so load on the machine hits each alike. Prints one JSON document with the
rates, the ratios to pods and the API server's CPU per create.

    .venv/bin/python bench/custom_resources.py            # 4,000 of each
    .venv/bin/python bench/custom_resources.py --quick    # 1,000 of each
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

import httpx
from harness import Lab, cpu_seconds, machine, run_concurrently

GROUP = "bench.example.com"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
SCHEMA = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
    "image": {"type": "string", "maxLength": 200}, "replicas": {"type": "integer", "minimum": 0, "default": 1},
    "port": {"x-kubernetes-int-or-string": True}, "env": {"type": "array", "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["name"], "items": {"type": "object", "required": ["name"],
    "properties": {"name": {"type": "string"}, "value": {"type": "string"}}}}}}}}


def pod(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"pod-{i:06}", "labels": {"app": "bench"}},
            "spec": {"nodeName": "phantom-node", "containers": [{"name": "app", "image": "nginx:1.25"}]}}


def webapp(i: int, version: str = "v1") -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{version}", "kind": "WebApp",
            "metadata": {"name": f"app-{version}-{i:06}", "labels": {"app": "bench"}},
            "spec": {"image": "nginx:1.25", "port": 80, "env": [{"name": "A", "value": "b"}]}}


def webapp_v1beta1(i: int) -> dict[str, Any]:
    return webapp(i, "v1beta1")


async def measure(server: str, pid: int, count: int, concurrency: int) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=server, timeout=60,
                                 limits=httpx.Limits(max_connections=concurrency)) as http:
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": f"webapps.{GROUP}"},
               "spec": {"group": GROUP, "scope": "Namespaced", "names": {"plural": "webapps", "kind": "WebApp"},
                        "versions": [{"name": "v1", "served": True, "storage": True,
                                      "schema": {"openAPIV3Schema": SCHEMA}},
                                     {"name": "v1beta1", "served": True, "storage": False,
                                      "schema": {"openAPIV3Schema": SCHEMA}}]}}
        (await http.post(CRDS, json=crd)).raise_for_status()
        for version in ("v1", "v1beta1"):
            while (await http.get(f"/apis/{GROUP}/{version}/namespaces/default/webapps")).status_code != 200:
                await asyncio.sleep(0.1)
        # wall seconds, API server CPU seconds
        spent = {"pods": [0.0, 0.0], "webapps": [0.0, 0.0], "webapps_v1beta1": [0.0, 0.0]}
        for start in range(0, count, 500):
            batch = range(start, min(start + 500, count))
            for what, path, body in (("pods", "/api/v1/namespaces/default/pods", pod),
                                     ("webapps", f"/apis/{GROUP}/v1/namespaces/default/webapps", webapp),
                                     ("webapps_v1beta1", f"/apis/{GROUP}/v1beta1/namespaces/default/webapps",
                                      webapp_v1beta1)):
                async def create(i: int, path: str = path, body: Any = body) -> None:
                    (await http.post(path, json=body(i))).raise_for_status()
                cpu = cpu_seconds(pid)
                spent[what][0] += await run_concurrently([lambda i=i: create(i) for i in batch], concurrency)
                spent[what][1] += cpu_seconds(pid) - cpu
    rates = {what: round(count / wall, 1) for what, (wall, _) in spent.items()}
    return {"count": count, "concurrency": concurrency, "pod_creates_per_s": rates["pods"],
            "custom_object_creates_per_s": rates["webapps"],
            "custom_object_v1beta1_creates_per_s": rates["webapps_v1beta1"],
            "ratio_custom_to_pod": round(rates["webapps"] / rates["pods"], 2),
            "ratio_custom_v1beta1_to_pod": round(rates["webapps_v1beta1"] / rates["pods"], 2),
            "apiserver_cpu_ms_per_pod_create": round(1000 * spent["pods"][1] / count, 2),
            "apiserver_cpu_ms_per_custom_create": round(1000 * spent["webapps"][1] / count, 2),
            "apiserver_cpu_ms_per_custom_v1beta1_create": round(1000 * spent["webapps_v1beta1"][1] / count, 2)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    lab = Lab()
    try:
        lab.start_etcd()
        server = lab.start_apiserver()
        result = asyncio.run(measure(server, lab.procs["apiserver"].pid, 1000 if args.quick else 4000,
                                     args.concurrency))
        print(json.dumps({"machine": machine(), "custom_resources": result}, indent=2))
    finally:
        lab.stop()


if __name__ == "__main__":
    main()
