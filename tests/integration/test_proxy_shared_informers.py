"""Proxy agents of one process on one shared Service and EndpointSlice informer (`kubelab up`'s nodes,
proxyagent/sharedinformers.py), against a real API server: the API server registers one watch per
kind however many agents there are; every agent writes the Service's rules; an agent started after the
informers synced is told what they hold; an agent that stops is unsubscribed and the others go on,
each syncing the changes it has not applied yet."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx
from polling import wait_for_async

from kubelab import kinds
from kubelab.client import ApiClient
from proxyagent import ProxyAgent, ProxyConfig, SharedProxyInformers
from proxyagent.apply import RecordingApplier

NS = "default"
SERVICE = "shared-informer-web"


def watchers(apiserver: str, kind: str) -> int:
    text = httpx.get(f"{apiserver}/metrics", timeout=10).text
    found = re.search(r'^apiserver_registered_watchers\{[^}]*kind="' + kind + r'"[^}]*\} (\S+)$', text, re.MULTILINE)
    return int(float(found.group(1))) if found else 0


def endpoint_slice(ips: list[str]) -> dict[str, Any]:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"{SERVICE}-abc", "namespace": NS,
                         "labels": {"kubernetes.io/service-name": SERVICE}},
            "addressType": "IPv4", "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True}} for ip in ips]}


def agent(api: ApiClient, informers: SharedProxyInformers, i: int) -> ProxyAgent:
    return ProxyAgent(api, ProxyConfig(node_name=f"shared-node-{i}", node_ips=(f"10.99.0.{i}",),
                                       cluster_cidr="10.244.0.0/16"),
                      RecordingApplier(), min_sync_period=0, informers=informers)


async def saved(a: ProxyAgent) -> str:
    return await a.applier.saved()


def test_agents_share_one_watch_and_keep_their_own_changes(apiserver: str) -> None:
    async def main() -> None:
        before = watchers(apiserver, "Service"), watchers(apiserver, "EndpointSlice")
        async with ApiClient(apiserver) as api:
            await api.create(kinds.SERVICES, {
                "apiVersion": "v1", "kind": "Service", "metadata": {"name": SERVICE, "namespace": NS},
                "spec": {"selector": {"app": SERVICE}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}})
            await api.create(kinds.ENDPOINTSLICES, endpoint_slice(["10.244.1.5"]))
            informers = SharedProxyInformers(api)
            agents = [agent(api, informers, i) for i in range(4)]
            tasks = [asyncio.create_task(informers.run())]
            tasks += [asyncio.create_task(a.run()) for a in agents[:3]]
            rules: dict[int, str] = {}

            async def all_have(ip: str, which: list[int]) -> bool:
                for i in which:
                    rules[i] = await saved(agents[i])
                return all(f"--to-destination {ip}:8080" in rules[i] for i in which)

            try:
                for a in agents[:3]:
                    await asyncio.wait_for(a.synced.wait(), 90)
                await wait_for_async("three agents to write the Service's endpoint",
                                     lambda: all_have("10.244.1.5", [0, 1, 2]), timeout=90)
                # One watch per kind for the three agents.
                assert (watchers(apiserver, "Service") - before[0],
                        watchers(apiserver, "EndpointSlice") - before[1]) == (1, 1)
                assert agents[0].services is agents[2].services and agents[0].slices is agents[1].slices

                # A fourth, started once the informers have synced, is told what they hold.
                tasks.append(asyncio.create_task(agents[3].run()))
                await asyncio.wait_for(agents[3].synced.wait(), 90)
                await wait_for_async("the late agent to write the Service's endpoint",
                                     lambda: all_have("10.244.1.5", [3]), timeout=90)

                # The first stops: unsubscribed; the rest follow a change; the stopped one writes nothing.
                tasks[1].cancel()
                await asyncio.gather(tasks[1], return_exceptions=True)
                restores = agents[0].applier.restores
                slice_now = await api.get(kinds.ENDPOINTSLICES, f"{SERVICE}-abc", NS)
                changed = endpoint_slice(["10.244.1.5", "10.244.2.7"])
                changed["metadata"]["resourceVersion"] = slice_now.metadata.resource_version
                await api.request("PUT", kinds.ENDPOINTSLICES.path(NS, f"{SERVICE}-abc"), body=changed)
                await wait_for_async("the running agents to write the new endpoint",
                                     lambda: all_have("10.244.2.7", [1, 2, 3]), timeout=90)
                assert agents[0].applier.restores == restores
                assert "10.244.2.7" not in await saved(agents[0])
                assert len(informers.services._handlers) == len(informers.slices._handlers) == 3
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                await api.delete(kinds.ENDPOINTSLICES, f"{SERVICE}-abc", NS)
                await api.delete(kinds.SERVICES, SERVICE, NS)
            assert len(informers.services._handlers) == 0

    asyncio.run(main())

