"""ServiceCIDRTracker (kube-proxy's ServiceCIDRConfig) and the proxiers' OnServiceCIDRsChanged."""

from __future__ import annotations

import asyncio

from kubelab.models import ServiceCIDR
from proxyagent import NftProxier, Proxier, ProxyConfig
from proxyagent.servicecidrs import ServiceCIDRTracker


def cidr(name: str, *cidrs: str) -> ServiceCIDR:
    return ServiceCIDR.model_validate({"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
                                       "metadata": {"name": name}, "spec": {"cidrs": list(cidrs)}})


def test_tracker_tells_the_union_after_sync_only() -> None:
    told: list[tuple[str, ...]] = []
    tracker = ServiceCIDRTracker(told.append)
    tracker.on_event("ADDED", None, cidr("kubernetes", "10.96.0.0/12"))
    assert told == []  # the first list is not complete yet
    tracker.mark_synced()
    tracker.mark_synced()
    assert told == [("10.96.0.0/12",)]
    tracker.on_event("ADDED", None, cidr("b", "10.250.0.0/16", "fd00::/112"))
    tracker.on_event("ADDED", None, cidr("c", "10.250.0.0/16"))  # the same range again: nothing new
    assert told[1:] == [("10.250.0.0/16", "10.96.0.0/12", "fd00::/112")]
    # Deleting one of two objects holding a range keeps it (upstream's plain set would lose it).
    tracker.on_event("DELETED", cidr("b", "10.250.0.0/16", "fd00::/112"), None)
    assert told[-1] == ("10.250.0.0/16", "10.96.0.0/12")
    tracker.on_event("DELETED", cidr("c", "10.250.0.0/16"), None)
    tracker.on_event("DELETED", cidr("kubernetes", "10.96.0.0/12"), None)
    assert told[-1] == ()


def test_tracker_tells_an_empty_list_once_synced() -> None:
    told: list[tuple[str, ...]] = []
    ServiceCIDRTracker(told.append).mark_synced()
    assert told == [()]


def test_nft_proxier_takes_its_family_and_asks_for_a_full_sync() -> None:
    async def main() -> None:
        proxier = NftProxier(ProxyConfig(node_name="n1", node_ips=("10.0.0.1",)), min_sync_period=0)
        assert proxier.nft_config.service_cidrs == ("10.96.0.0/12",)  # until the API's are known
        proxier.need_full_sync = False
        proxier.on_service_cidrs_changed(("fd00::/112", "10.96.0.0/12"))
        assert proxier.need_full_sync is False  # this family's ranges did not change
        proxier.on_service_cidrs_changed(("10.250.0.0/16", "10.96.0.0/12", "fd00::/112", "bogus"))
        assert proxier.nft_config.service_cidrs == ("10.250.0.0/16", "10.96.0.0/12")
        assert proxier.need_full_sync is True
        v6 = NftProxier(ProxyConfig(node_name="n1", node_ips=("fd00::1",), ip_family="IPv6"), min_sync_period=0)
        v6.on_service_cidrs_changed(("10.96.0.0/12", "fd00:10:96::/112"))
        assert v6.nft_config.service_cidrs == ("fd00:10:96::/112",)
        # The iptables proxier has no use for them, as upstream's.
        Proxier(ProxyConfig(node_name="n1"), min_sync_period=0).on_service_cidrs_changed(("10.0.0.0/8",))

    asyncio.run(main())
