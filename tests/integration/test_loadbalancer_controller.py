"""The LoadBalancer controller against a real API server and etcd, run by the controller manager.

The controller sees every Service of the cluster, so this module runs its own etcd and API server:
Services other modules create in the shared one must not take addresses from the pool under test.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
from apitools import CORE, ns_path, unique_name
from polling import wait_for_async as wait_for

import controllers
from controllers.loadbalancer import LoadBalancerController, Pool
from kubelab import kinds
from kubelab.client import ApiClient, Informer
from kubelab.models import Service

POOL = "172.18.255.200-172.18.255.202"


@contextlib.asynccontextmanager
async def controller_manager(url: str, pool: str = POOL) -> AsyncIterator[None]:
    api = ApiClient(url, user_agent="kubelab-controllers-test")
    task = asyncio.create_task(controllers.run(api, lb_pool=pool))
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await api.close()


def lb_service(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"type": "LoadBalancer", "selector": {"app": name}, "ports": [{"port": 80}], **spec}}


async def create(http: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    resp = await http.post(ns_path("services"), json=body)
    assert resp.status_code == 201, resp.text
    return resp.json()  # type: ignore[no-any-return]


async def get(http: httpx.AsyncClient, name: str) -> dict[str, Any]:
    resp = await http.get(ns_path("services", name=name))
    assert resp.status_code == 200, resp.text
    return resp.json()  # type: ignore[no-any-return]


def ingress(svc: dict[str, Any]) -> list[dict[str, Any]]:
    return ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []


async def ingress_of(http: httpx.AsyncClient, name: str, expected: list[dict[str, Any]]) -> dict[str, Any]:
    async def check() -> Any:
        svc = await get(http, name)
        return svc if ingress(svc) == expected else None
    return await wait_for(f"{name} to have ingress {expected}", check)  # type: ignore[no-any-return]


async def events_for(http: httpx.AsyncClient, name: str, reason: str) -> list[dict[str, Any]]:
    resp = await http.get(f"{CORE}/namespaces/default/events")
    return [e for e in resp.json()["items"]
            if e["involvedObject"]["name"] == name and e["reason"] == reason]


def vip(ip: str) -> list[dict[str, Any]]:
    return [{"ip": ip, "ipMode": "VIP"}]


async def test_addresses_are_given_kept_unique_and_released(private_api: str) -> None:
    a, b, c, d = (unique_name(n) for n in ("lb-a", "lb-b", "lb-c", "lb-d"))
    async with httpx.AsyncClient(base_url=private_api, timeout=10) as http, controller_manager(private_api):
        created = await create(http, lb_service(a))
        first = await ingress_of(http, a, vip("172.18.255.200"))
        # Written through services/status: the spec is the user's, untouched.
        assert first["spec"] == created["spec"]
        assert int(first["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
        assert await wait_for("an IPAllocated event", lambda: events_for(http, a, "IPAllocated"))

        await create(http, lb_service(b, loadBalancerIP="172.18.255.202"))
        await ingress_of(http, b, vip("172.18.255.202"))
        await create(http, lb_service(c))
        await ingress_of(http, c, vip("172.18.255.201"))
        # The pool is exhausted: d waits, without an address, and says why.
        await create(http, lb_service(d))
        warning = await wait_for("an AllocationFailed event", lambda: events_for(http, d, "AllocationFailed"))
        assert warning[0]["type"] == "Warning" and "no available IPs" in warning[0]["message"]
        assert ingress(await get(http, d)) == []

        # Deleting a frees its address for d.
        assert (await http.delete(ns_path("services", name=a))).status_code == 200
        await ingress_of(http, d, vip("172.18.255.200"))

        # b stops being a LoadBalancer: its ingress is cleared, and nobody else changed address.
        patched = await http.patch(ns_path("services", name=b), json={"spec": {"type": "ClusterIP"}},
                                   headers={"Content-Type": "application/merge-patch+json"})
        assert patched.status_code == 200, patched.text
        await ingress_of(http, b, [])
        assert ingress(await get(http, c)) == vip("172.18.255.201")
        assert ingress(await get(http, d)) == vip("172.18.255.200")

        for name in (b, c, d):
            await http.delete(ns_path("services", name=name))


async def test_services_that_are_not_ours_are_left_alone(private_api: str) -> None:
    other, plain, outside = unique_name("lb-class"), unique_name("plain"), unique_name("lb-outside")
    async with httpx.AsyncClient(base_url=private_api, timeout=10) as http, controller_manager(private_api):
        before = await create(http, lb_service(other, loadBalancerClass="example.com/metal"))
        await create(http, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": plain},
                            "spec": {"selector": {"app": "x"}, "ports": [{"port": 80}]}})
        await create(http, lb_service(outside, loadBalancerIP="10.1.2.3"))
        await wait_for("an AllocationFailed event", lambda: events_for(http, outside, "AllocationFailed"))

        assert ingress(await get(http, outside)) == []
        assert (await get(http, other))["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
        assert ingress(await get(http, plain)) == []
        for name in (other, plain, outside):
            await http.delete(ns_path("services", name=name))


async def test_a_restarted_controller_keeps_every_assignment(private_api: str) -> None:
    names = [unique_name("lb-r") for _ in range(3)]
    late = unique_name("lb-late")
    async with httpx.AsyncClient(base_url=private_api, timeout=10) as http:
        async with controller_manager(private_api):
            for name in names:
                await create(http, lb_service(name))
            for name in names:
                await wait_for(f"{name} to get an address", lambda name=name: _has_ingress(http, name))
        assigned = {name: await get(http, name) for name in names}
        assert sorted(ingress(svc)[0]["ip"] for svc in assigned.values()) == [
            "172.18.255.200", "172.18.255.201", "172.18.255.202"]

        async with controller_manager(private_api):
            # The restarted controller knows the whole pool is taken from the statuses alone...
            await create(http, lb_service(late))
            await wait_for("an AllocationFailed event", lambda: events_for(http, late, "AllocationFailed"))
            # ...and rewrote none of them.
            for name, svc in assigned.items():
                now = await get(http, name)
                assert now["metadata"]["resourceVersion"] == svc["metadata"]["resourceVersion"]
        for name in (*names, late):
            await http.delete(ns_path("services", name=name))


async def _has_ingress(http: httpx.AsyncClient, name: str) -> bool:
    return bool(ingress(await get(http, name)))


async def state_at(http: httpx.AsyncClient, revision: str) -> list[Service]:
    """Every Service as of `revision`: what an informer whose watch has got that far holds."""
    resp = await http.get("/api/v1/services", params={"resourceVersion": revision, "resourceVersionMatch": "Exact"})
    assert resp.status_code == 200, resp.text
    return [Service.from_dict({**item, "apiVersion": "v1", "kind": "Service"}) for item in resp.json()["items"]]


async def test_an_address_written_counts_before_the_cache_shows_it(private_api: str) -> None:
    """A second Service asks for the address the controller has just given the first, and its turn comes
    while the controller's cache has its creation but not yet the first one's status write (that write
    came after it): the address is taken all the same, and the second is refused, not handed it too."""
    first, second = unique_name("lb-lag"), unique_name("lb-lag")
    async with httpx.AsyncClient(base_url=private_api, timeout=10) as http, \
            ApiClient(private_api, user_agent="kubelab-controllers-test") as api:
        created_first = await create(http, lb_service(first))
        created_second = await create(http, lb_service(second, loadBalancerIP="172.18.255.200"))
        services: Informer[Service] = Informer(api, kinds.SERVICES)  # not run: its cache is set as a watch left it
        services._replace(await state_at(http, created_first["metadata"]["resourceVersion"]))
        controller = LoadBalancerController(api, services, Pool.parse(POOL))
        await controller.reconcile(f"default/{first}")
        assert [i["ip"] for i in ingress(await get(http, first))] == ["172.18.255.200"]

        services._replace(await state_at(http, created_second["metadata"]["resourceVersion"]))
        await controller.reconcile(f"default/{second}")
        assert ingress(await get(http, second)) == []
        await wait_for("an AllocationFailed event", lambda: events_for(http, second, "AllocationFailed"))
        assert [i["ip"] for i in ingress(await get(http, first))] == ["172.18.255.200"]
        for name in (first, second):
            await http.delete(ns_path("services", name=name))
