"""nftables-mode proxy agents take their Service ranges from the API's networking.k8s.io/v1
ServiceCIDR objects (kube-proxy's ServiceCIDRConfig -> OnServiceCIDRsChanged), against a real API
server: the drop rule for unallocated ClusterIPs holds the default `kubernetes` range, then a second
ServiceCIDR's range too (rewritten by a full sync, as setupNFTables writes it), never a range of the
other family, and loses it again when the object is deleted; agents on the shared informers
(`kubelab up`) share one ServiceCIDR watch and each follows it."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable

import httpx
from polling import wait_for_async as until

from kubelab import kinds
from kubelab.client import ApiClient, ApiError
from proxyagent import ProxyAgent, ProxyConfig, SharedProxyInformers
from proxyagent.nftables.apply import RecordingNftApplier

EXTRA = "m-cidr-extra"
EXTRA_V6 = "m-cidr-extra-v6"
DROP = re.compile(r"ip daddr \{ ([^}]*) \} drop")


def agent(api: ApiClient, i: int, informers: SharedProxyInformers | None = None) -> ProxyAgent:
    return ProxyAgent(api, ProxyConfig(node_name=f"cidr-node-{i}", node_ips=(f"10.99.0.{i}",),
                                       cluster_cidr="10.244.0.0/16"),
                      min_sync_period=0, proxy_mode="nftables", informers=informers)


def nft(a: ProxyAgent) -> RecordingNftApplier:
    applier = a.proxier.nft  # type: ignore[attr-defined]
    assert isinstance(applier, RecordingNftApplier)
    return applier


async def drop_ranges(a: ProxyAgent) -> list[str] | None:
    """The ranges of the table's drop rule for unallocated ClusterIPs (None: no such rule)."""
    found = DROP.findall(await nft(a).listed())
    assert len(found) <= 1, found
    return found[0].split(",") if found else None


def service_cidr(name: str, *cidrs: str) -> dict[str, object]:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": name},
            "spec": {"cidrs": list(cidrs)}}


def watchers(apiserver: str, kind: str) -> int:
    text = httpx.get(f"{apiserver}/metrics", timeout=10).text
    found = re.search(r'^apiserver_registered_watchers\{[^}]*kind="' + kind + r'"[^}]*\} (\S+)$', text, re.MULTILINE)
    return int(float(found.group(1))) if found else 0


def test_agent_follows_servicecidr_objects(apiserver: str) -> None:
    async def main() -> None:
        async with ApiClient(apiserver) as api:
            a = agent(api, 1)
            task = asyncio.create_task(a.run())
            try:
                await asyncio.wait_for(a.synced.wait(), 90)
                # The default `kubernetes` ServiceCIDR (the API server's --service-cluster-ip-range).
                await until("the default range in the drop rule",
                            lambda: _equals(drop_ranges(a), ["10.96.0.0/12"]))

                before = nft(a).transactions
                await api.create(kinds.SERVICECIDRS, service_cidr(EXTRA, "10.250.0.0/16"))
                await until("the second ServiceCIDR's range in the drop rule",
                            lambda: _equals(drop_ranges(a), ["10.250.0.0/16", "10.96.0.0/12"]))
                assert nft(a).transactions > before
                # Written as setupNFTables writes it: in a full sync that flushes the chain first.
                assert "flush chain ip kube-proxy cluster-ips-check\n" in nft(a).last_transaction
                assert ("add rule ip kube-proxy cluster-ips-check ip daddr { 10.250.0.0/16,10.96.0.0/12 } drop "
                        'comment "Drop traffic to unallocated ClusterIPs"\n') in nft(a).last_transaction

                # An IPv6 range is not the IPv4 proxier's; deleting the IPv4 one takes its range away.
                await api.create(kinds.SERVICECIDRS, service_cidr(EXTRA_V6, "fd00:10:250::/112"))
                await api.delete(kinds.SERVICECIDRS, EXTRA)
                await until("the drop rule back to the default range",
                            lambda: _equals(drop_ranges(a), ["10.96.0.0/12"]))
                assert "fd00" not in await nft(a).listed()
                assert a.cidr_tracker.cidrs == ("10.96.0.0/12", "fd00:10:250::/112")
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                for name in (EXTRA, EXTRA_V6):
                    with contextlib.suppress(ApiError):  # already gone
                        await api.delete(kinds.SERVICECIDRS, name)

    asyncio.run(main())


def test_shared_informers_share_one_servicecidr_watch(apiserver: str) -> None:
    async def main() -> None:
        before = watchers(apiserver, "ServiceCIDR")
        async with ApiClient(apiserver) as api:
            informers = SharedProxyInformers(api)
            agents = [agent(api, i, informers) for i in (2, 3)]
            tasks = [asyncio.create_task(informers.run())] + [asyncio.create_task(a.run()) for a in agents]
            try:
                for a in agents:
                    await asyncio.wait_for(a.synced.wait(), 90)
                await api.create(kinds.SERVICECIDRS, service_cidr(EXTRA, "10.251.0.0/16"))
                for a in agents:
                    await until(f"{a.config.node_name} to drop the new range",
                                lambda a=a: _equals(drop_ranges(a), ["10.251.0.0/16", "10.96.0.0/12"]))
                assert watchers(apiserver, "ServiceCIDR") - before == 1
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                await api.delete(kinds.SERVICECIDRS, EXTRA)
            assert informers.service_cidrs._handlers == []

    asyncio.run(main())


async def _equals(value: Awaitable[list[str] | None], expected: list[str]) -> bool:
    return await value == expected
