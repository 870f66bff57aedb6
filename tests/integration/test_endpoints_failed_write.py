"""A sync of the Endpoints or EndpointSlice controller whose write is refused leaves the controller's
informer cache as the API server sent it. Both controllers used to put the new endpoints into the cached
object itself before writing it: after a refused write the cache showed endpoints the API server never
stored, and the next sync, comparing with that, wrote nothing (kube's controllers write from a copy).
Real API server and etcd; the refusal is a real 409: the object was changed behind the controller's
informer, whose watch the test stops first."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest
from polling import wait_for_async as until

from controllers.endpoints import EndpointsController
from controllers.endpointslices import EndpointSliceController
from controllers.informers import SharedInformers
from kubelab.client import ApiClient, Conflict
from kubelab.client.informer import Informer

NS = "default"


def make_ready_pod(api: httpx.Client, name: str, app: str, ip: str) -> None:
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": app}},
            "spec": {"containers": [{"name": "c", "image": "pause", "ports": [{"containerPort": 8080}]}]}}
    created = api.post(f"/api/v1/namespaces/{NS}/pods", json=body)
    assert created.status_code == 201, created.text
    pod = created.json()
    pod["status"] = {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                     "conditions": [{"type": "Ready", "status": "True",
                                     "lastTransitionTime": "2024-05-01T10:00:05Z"}]}
    updated = api.put(f"/api/v1/namespaces/{NS}/pods/{name}/status", json=pod)
    assert updated.status_code == 200, updated.text


def addresses(obj: Any, kind: str) -> list[str]:
    if kind == "slices":
        return sorted(a for e in obj.endpoints or [] for a in e.addresses)
    return sorted(a.ip for s in obj.subsets or [] for a in s.addresses or [])


async def refused_sync(url: str, api: httpx.Client, kind: str, app: str) -> None:
    key = f"{NS}/{app}"
    async with ApiClient(url, user_agent="failed-write-test") as client:
        informers = SharedInformers(client)
        owned: Informer[Any] = informers.slices if kind == "slices" else informers.endpoints
        controller = (EndpointSliceController(client, informers) if kind == "slices"
                      else EndpointsController(client, informers))
        watched: list[Informer[Any]] = [informers.services, informers.pods, informers.nodes, informers.endpoints, informers.slices]
        tasks = {id(i): asyncio.create_task(i.run()) for i in watched}
        try:
            for informer in watched:
                await informer.wait_synced()

            def stored() -> Any:
                found = [o for o in owned.items() if o.metadata.namespace == NS and (
                    o.metadata.name == app if kind == "endpoints"
                    else (o.metadata.labels or {}).get("kubernetes.io/service-name") == app)]
                return found[0] if found else None

            await until("the pod in the informer", lambda: informers.pods.get(f"{NS}/{app}-a") is not None
                        and informers.pods.get(f"{NS}/{app}-a").pod_ip)  # type: ignore[union-attr]
            await controller.reconcile(key)
            await until("the first write in the informer", lambda: stored() is not None and addresses(
                stored(), kind) == ["10.244.9.1"])
            # The informer of the controller's own objects stops: its cache keeps this version.
            tasks[id(owned)].cancel()
            cached = stored()
            path = (f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices/{cached.metadata.name}"
                    if kind == "slices" else f"/api/v1/namespaces/{NS}/endpoints/{app}")
            behind = api.get(path).json()
            behind["metadata"].setdefault("annotations", {})["touched"] = "by the test"
            assert api.put(path, json=behind).status_code == 200
            make_ready_pod(api, f"{app}-b", app, "10.244.9.2")
            await until("the second pod in the informer", lambda: informers.pods.get(f"{NS}/{app}-b") is not None
                        and informers.pods.get(f"{NS}/{app}-b").pod_ip)  # type: ignore[union-attr]
            with pytest.raises(Conflict):
                await controller.reconcile(key)
            # The cache still shows what the API server sent: one address, not the two the sync wanted.
            assert stored() is cached
            assert addresses(cached, kind) == ["10.244.9.1"]
        finally:
            for task in tasks.values():
                task.cancel()
            await asyncio.gather(*tasks.values(), return_exceptions=True)


@pytest.mark.parametrize("kind", ["slices", "endpoints"])
def test_a_refused_write_leaves_the_informer_cache_as_stored(apiserver: str, api: httpx.Client, kind: str) -> None:
    app = f"fw-{kind}-{uuid.uuid4().hex[:6]}"
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": app},
               "spec": {"selector": {"app": app}, "ports": [{"port": 80, "targetPort": 8080}]}}
    assert api.post(f"/api/v1/namespaces/{NS}/services", json=service).status_code == 201
    make_ready_pod(api, f"{app}-a", app, "10.244.9.1")
    try:
        asyncio.run(refused_sync(apiserver, api, kind, app))
    finally:
        for pod in ("a", "b"):
            api.delete(f"/api/v1/namespaces/{NS}/pods/{app}-{pod}", params={"gracePeriodSeconds": "0"})
        api.delete(f"/api/v1/namespaces/{NS}/services/{app}")
