"""What a partial nftables sync visits: the changed Service's ports, chains and elements, not the
table's. The counts come from the renderer's own per-port, per-element and per-chain functions
(wrapped, still run), at two cluster sizes: a one-Service change visits as much at 2,000 Services
as at 200, while a full sync visits every port. The bookkeeping the next sync starts from (tracked
elements, active chains and affinity sets, footprints) is the previous sync's, updated in place,
not rebuilt; and the proxier hands the render only the stale chains, never the table's."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from proxyobjects import endpoint_slice, ep, listed, port, service
from proxytimer import FakeTimer

from kubelab.models import EndpointSlice, Service
from proxyagent import ProxyConfig
from proxyagent.nftables import render as nft_render
from proxyagent.nftables.apply import RecordingNftApplier
from proxyagent.nftables.render import NftConfig, NftRuleset, render_nft_ports
from proxyagent.nftproxier import NftProxier
from proxyagent.serviceports import build_endpoints_map, build_service_ports

CONFIG = NftConfig(node_name="node-1", node_ips=("10.240.0.11",), cluster_cidr="10.244.0.0/16",
                   nodeport_addresses=("primary",), service_cidrs=("10.96.0.0/12",))
AFFINITY = {"sessionAffinity": "ClientIP", "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}}}


def objects(n: int, *, moved: int | None = None) -> tuple[list[Service], list[EndpointSlice]]:
    """n NodePort Services with affinity, 3 endpoints each (Service `moved` with one moved elsewhere)."""
    services = [service("bench", f"svc-{i}", cluster_ip=f"10.96.{i // 250}.{i % 250 + 1}", svc_type="NodePort",
                        ports=[port("http", 80, nodePort=30000 + i)], **AFFINITY) for i in range(n)]
    slices = [endpoint_slice("bench", f"svc-{i}",
                             [ep(f"10.244.{i // 250}.{i % 250 + 1}"), ep(f"10.245.{i // 250}.{i % 250 + 1}"),
                              ep(f"10.{247 if i == moved else 246}.{i // 250}.{i % 250 + 1}")],
                             [port("http", 8080)]) for i in range(n)]
    return services, slices


def counting(monkeypatch: pytest.MonkeyPatch, counts: Counter[str], name: str, owner: Any = nft_render) -> None:
    """Count the calls of `owner.name`, which still does its work."""
    original: Callable[..., Any] = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        counts[name] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, wrapper)


def one_change(n: int, monkeypatch: pytest.MonkeyPatch) -> tuple[Counter[str], NftRuleset, NftRuleset]:
    """A full sync of n Services, then the partial sync of one Service's endpoint moving: what each visited."""
    services, slices = objects(n)
    ports = build_service_ports(services)
    counts: Counter[str] = Counter()
    with monkeypatch.context() as patch:
        for name in ("_render_port", "is_service_chain", "is_affinity_set"):
            counting(patch, counts, name)
        counting(patch, counts, "ensure", nft_render._ElementStorage)
        full = render_nft_ports(ports, build_endpoints_map(slices, node_name=CONFIG.node_name), CONFIG)
        full_counts = Counter(counts)
        counts.clear()
        live = (full.elements, full.active_chains, full.active_affinity_sets, full.footprints)
        _, moved = objects(n, moved=n // 2)
        key = f"bench/svc-{n // 2}"

        def every_port() -> list[Any]:
            counts["every port"] += 1
            return ports

        partial = render_nft_ports(every_port, build_endpoints_map(moved, node_name=CONFIG.node_name), CONFIG,
                                   changed={key}, previous=full,
                                   changed_ports=[sp for sp in ports if sp.service_key == key])
    assert full_counts["_render_port"] == n
    # Updated in place: the same containers, not copies of 40k chains or 10k elements per sync.
    assert all(a is b for a, b in zip(live, (partial.elements, partial.active_chains, partial.active_affinity_sets,
                                             partial.footprints), strict=True))
    return counts, full, partial


def test_a_one_service_change_visits_that_service_only_whatever_the_cluster_size(
        monkeypatch: pytest.MonkeyPatch) -> None:
    small, _, small_partial = one_change(200, monkeypatch)
    large, _, large_partial = one_change(2000, monkeypatch)
    # One service port rendered; its 5 chains (service, 3 endpoints... one moved: 4 active + 1 stale)
    # and 3 affinity sets judged; its elements (cluster-ips, service-ips, service-nodeports) ensured.
    assert small == large
    assert large["_render_port"] == 1 and large["every port"] == 0
    assert large["is_service_chain"] <= 2 and large["is_affinity_set"] <= 1 and large["ensure"] == 3
    assert len(large_partial.stale_chains) == 1 and "10.246." in large_partial.stale_chains[0]
    assert large_partial.text.count("\n") == small_partial.text.count("\n")
    assert large_partial.service_ports == 2000 and large_partial.endpoints_total == 6000


async def test_the_proxier_gives_the_render_the_stale_chains_not_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """At 1,000 Services the proxier's partial sync renders one port, never lists every port or the
    kernel's chains, and hands the render only the chains flushed earlier and not deleted yet."""
    services, slices = objects(1000)
    applier = RecordingNftApplier()
    config = ProxyConfig(node_name="node-1", node_ips=("10.240.0.11",), cluster_cidr="10.244.0.0/16")
    # The clock stands still: no stale chain is a second old yet (the model's deep copies are slow).
    proxier = listed(NftProxier(config, applier, timer=FakeTimer()), [*services, *slices])
    await proxier.sync_proxy_rules()
    counts: Counter[str] = Counter()
    stale_given: list[int] = []
    for name in ("_render_port", "is_service_chain"):
        counting(monkeypatch, counts, name)
    counting(monkeypatch, counts, "existing", applier)
    counting(monkeypatch, counts, "service_ports", proxier.state)
    render = nft_render.render_nft_ports

    def spy(*args: Any, **kwargs: Any) -> NftRuleset:
        stale_given.append(len(kwargs.get("stale_chains", ())))
        assert not kwargs.get("existing_chains") and not kwargs.get("existing_sets")
        return render(*args, **kwargs)

    monkeypatch.setattr("proxyagent.nftproxier.render_nft_ports", spy)
    _, moved = objects(1000, moved=500)
    for k in range(3):  # the endpoint moved, back, and again: each sync flushes one more chain
        proxier.on_slice("MODIFIED", slices[500] if k % 2 == 0 else moved[500],
                         moved[500] if k % 2 == 0 else slices[500])
        await proxier.sync_proxy_rules()
        assert proxier.last_nft is not None and not proxier.last_nft.full_sync
    assert counts["_render_port"] == 3 and counts["existing"] == 0 and counts["service_ports"] == 0
    # Stale chains handed over: none, then the first moved endpoint's (used again by the second sync),
    # then the second's: proportional to what changed lately.
    assert stale_given == [0, 1, 1]
    assert counts["is_service_chain"] <= 6
