"""Optimistic concurrency under contention: 20 writers send an update carrying the same resourceVersion
at the same moment. etcd's compare on mod_revision lets exactly one through; the other 19 get kube's
409 Conflict, and the stored object is the winner's, changed exactly once.
"""

from __future__ import annotations

import asyncio
import secrets
from collections import Counter
from typing import Any

import httpx
import pytest
from faultkit import Figures

WRITERS = 20
ROUNDS = 5

KINDS = [
    pytest.param("/api/v1/namespaces/default/configmaps", "configmaps",
                 lambda name: {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "b"}},
                 id="configmap"),
    pytest.param("/api/v1/namespaces/default/services", "services",
                 lambda name: {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                               "spec": {"type": "NodePort", "ports": [{"port": 80}], "selector": {"app": name}}},
                 id="nodeport service"),
    pytest.param("/api/v1/namespaces/default/pods", "pods",
                 lambda name: {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                               "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}},
                 id="pod"),
    pytest.param("/api/v1/nodes", "nodes",
                 lambda name: {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}, id="node"),
]


def conflict_message(resource: str, name: str) -> str:
    return (f'Operation cannot be fulfilled on {resource} "{name}": the object has been modified; please apply '
            "your changes to the latest version and try again")


@pytest.mark.parametrize("verb", ["PUT", "PATCH"])
@pytest.mark.parametrize(("path", "resource", "make"), KINDS)
async def test_one_of_twenty_same_version_updates_wins(apiserver: str, path: str, resource: str, make: Any,
                                                       verb: str, figures: Figures) -> None:
    name = f"race-{secrets.token_hex(3)}"
    async with httpx.AsyncClient(base_url=apiserver, timeout=30,
                                 limits=httpx.Limits(max_connections=WRITERS)) as client:
        created = await client.post(path, json=make(name))
        assert created.status_code == 201, created.text
        outcomes: Counter[int] = Counter()
        try:
            for round_ in range(ROUNDS):
                current = (await client.get(f"{path}/{name}")).json()
                rv = current["metadata"]["resourceVersion"]

                async def write(writer: int, current: dict[str, Any] = current, round_: int = round_,
                                rv: str = rv) -> httpx.Response:
                    labels = {**(current["metadata"].get("labels") or {}), "writer": f"r{round_}-w{writer}"}
                    if verb == "PUT":
                        body = {**current, "metadata": {**current["metadata"], "labels": labels}}
                        return await client.put(f"{path}/{name}", json=body)
                    patch = {"metadata": {"resourceVersion": rv, "labels": labels}}
                    return await client.patch(f"{path}/{name}", json=patch,
                                              headers={"Content-Type": "application/merge-patch+json"})

                answers = await asyncio.gather(*(write(w) for w in range(WRITERS)))
                codes = Counter(a.status_code for a in answers)
                outcomes.update(codes)
                assert codes == {200: 1, 409: WRITERS - 1}, [(a.status_code, a.text[:200]) for a in answers]
                for answer in answers:
                    if answer.status_code == 409:
                        status = answer.json()
                        assert (status["reason"], status["message"]) == ("Conflict", conflict_message(resource, name))
                winner = next(a.json() for a in answers if a.status_code == 200)
                stored = (await client.get(f"{path}/{name}")).json()
                assert stored["metadata"]["labels"]["writer"] == winner["metadata"]["labels"]["writer"]
                assert stored["metadata"]["resourceVersion"] == winner["metadata"]["resourceVersion"] != rv
        finally:
            await client.delete(f"{path}/{name}")
    figures.update(writers=WRITERS, rounds=ROUNDS, won=outcomes[200], conflicts=outcomes[409])
