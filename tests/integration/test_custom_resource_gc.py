"""Custom objects and the controller manager: garbage collection both ways with built-in kinds, and a
namespace's deletion emptying its custom objects too, against a real API server and etcd with the real
controller manager running in-process over HTTP."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
from apitools import unique_name
from polling import wait_for_async as wait_for
from test_custom_resources import CRDS, definition, widget

import controllers
from kubelab.client import ApiClient


@contextlib.asynccontextmanager
async def controller_manager(url: str) -> AsyncIterator[httpx.AsyncClient]:
    api = ApiClient(url, user_agent="kubelab-test-crd-gc")
    task = asyncio.create_task(controllers.run(api, lb_pool=None, node_monitor_grace_period=600))
    try:
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            yield http
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await api.close()


async def _established(http: httpx.AsyncClient, name: str) -> None:
    async def check() -> bool:
        conditions = (await http.get(f"{CRDS}/{name}")).json()["status"].get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)
    await wait_for(f"{name} Established", check)


def _owner(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
             "uid": obj["metadata"]["uid"]}]


async def test_custom_and_built_in_objects_own_each_other(private_api: str) -> None:
    group = f"{unique_name('gc')}.example.com"
    crd = definition(group)
    async with controller_manager(private_api) as http:
        assert (await http.post(CRDS, json=crd)).status_code == 201
        await _established(http, crd["metadata"]["name"])
        widgets = f"/apis/{group}/v1/namespaces/default/widgets"
        configmaps = "/api/v1/namespaces/default/configmaps"
        # A built-in dependent of a custom owner.
        owner = (await http.post(widgets, json=widget(group, "owner"))).json()
        cm = {"metadata": {"name": f"{group}-dep", "ownerReferences": _owner(owner)}}
        assert (await http.post(configmaps, json=cm)).status_code == 201
        # A custom dependent of a built-in owner.
        held = (await http.post(configmaps, json={"metadata": {"name": f"{group}-owner"}})).json()
        dep = {**widget(group, "dep"), "metadata": {"name": "dep", "ownerReferences": _owner(
            {**held, "apiVersion": "v1", "kind": "ConfigMap"})}}
        assert (await http.post(widgets, json=dep)).status_code == 201

        await http.delete(f"{widgets}/owner")

        async def configmap_gone() -> bool:
            return (await http.get(f"{configmaps}/{group}-dep")).status_code == 404

        await wait_for("the ConfigMap owned by the Widget collected", configmap_gone)
        await http.delete(f"{configmaps}/{group}-owner")

        async def widget_gone() -> bool:
            return (await http.get(f"{widgets}/dep")).status_code == 404

        await wait_for("the Widget owned by the ConfigMap collected", widget_gone)
        await http.delete(f"{CRDS}/{crd['metadata']['name']}")


async def test_deleting_a_namespace_deletes_its_custom_objects(private_api: str) -> None:
    group = f"{unique_name('ns')}.example.com"
    crd = definition(group)
    namespace = unique_name("crns")
    async with controller_manager(private_api) as http:
        assert (await http.post(CRDS, json=crd)).status_code == 201
        await _established(http, crd["metadata"]["name"])
        assert (await http.post("/api/v1/namespaces", json={"metadata": {"name": namespace}})).status_code == 201
        path = f"/apis/{group}/v1/namespaces/{namespace}/widgets"
        assert (await http.post(path, json=widget(group, "w"))).status_code == 201
        await http.delete(f"/api/v1/namespaces/{namespace}")

        async def namespace_gone() -> bool:
            return (await http.get(f"/api/v1/namespaces/{namespace}")).status_code == 404

        await wait_for("the namespace gone", namespace_gone)
        assert (await http.get(f"/apis/{group}/v1/widgets")).json()["items"] == []
        await http.delete(f"{CRDS}/{crd['metadata']['name']}")
