"""The nftables proxier against the real `nft` (root), in a network namespace of its own: a full sync,
a partial sync that only touches what changed, stale chains flushed and deleted by a later sync, a
deleted table repaired by the full sync that follows the failure, and a restarted agent taking over
a populated table, and switching a namespace between the modes (each removes the other's rules). After each step the kernel's table is what a fresh full sync of the same objects
would leave (chains and map/set elements, as `nft -j list` shows them).

Every namespace is created here with a unique name and deleted in a finally, whatever happened.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from nfttable import Table, read_table
from proxyobjects import endpoint_slice, ep, listed, port, service
from scratchns import scratch_netns

from kubelab.models import EndpointSlice, Service
from proxyagent import Proxier, ProxyAgent, ProxyConfig
from proxyagent.apply import IptablesApplier
from proxyagent.nftables import apply_transaction, render_nft
from proxyagent.nftables.apply import NftApplier
from proxyagent.nftables.names import is_service_chain
from proxyagent.nftproxier import NftProxier, nft_config_of

pytestmark = pytest.mark.root

CONFIG = ProxyConfig(node_name="node-1", node_ips=("10.240.0.11",), cluster_cidr="10.244.0.0/16")
HTTP, TARGET = [port("http", 80)], [port("http", 8080)]


@pytest.fixture
def netns() -> Iterator[str]:
    with scratch_netns("klnftp", tools=("ip", "nft")) as name:
        yield name


def nft(ns: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", ns, "nft", *args], capture_output=True, text=True, timeout=60,
                          check=False)


def kernel(ns: str) -> Table:
    """The kube-proxy table now: chain -> rule count, set/map -> element keys."""
    table = read_table(ns)
    assert table is not None, nft(ns, "list", "table", "ip", "kube-proxy").stderr
    return table


def fresh(services: list[Service], slices: list[EndpointSlice]) -> tuple[dict[str, int], dict[str, set[str]]]:
    """What a fresh full sync of these objects leaves, in the same view."""
    table = apply_transaction(None, render_nft(services, slices, nft_config_of(CONFIG)).text)
    assert table is not None
    return ({name: len(chain.rules) for name, chain in table.chains.items()},
            {name: set(s.elements) for name, s in table.sets.items()})


def svc(name: str, ip: str) -> Service:
    return service("default", name, cluster_ip=ip, ports=HTTP)


def eps(name: str, *ips: str) -> EndpointSlice:
    return endpoint_slice("default", name, [ep(ip, "node-1") for ip in ips], TARGET)


SERVICES = [svc("alpha", "10.96.0.10"), svc("beta", "10.96.0.11"), svc("gamma", "10.96.0.12")]
SLICES = [eps("alpha", "10.244.1.2"), eps("beta", "10.244.1.3", "10.244.1.4", "10.244.1.6"),
          eps("gamma", "10.244.1.5")]


def service_chains(chains: dict[str, int]) -> set[str]:
    return {c for c in chains if is_service_chain(c)}


async def test_full_then_partial_syncs_and_stale_chains_on_real_nft(netns: str) -> None:
    from proxytimer import FakeTimer  # the proxier's monotonic time, moved by the test

    timer = FakeTimer(start=1000.0)
    applier = NftApplier(netns)
    proxier = listed(NftProxier(CONFIG, applier, timer=timer), [*SERVICES, *SLICES])
    reports: list[dict[str, object]] = []
    proxier.on_synced = reports.append

    await proxier.sync_proxy_rules()
    first = proxier.last_nft
    assert first is not None and first.full_sync and applier.transactions == 1
    assert kernel(netns) == fresh(SERVICES, SLICES)
    assert "numgen random mod 3 vmap" in nft(netns, "list", "table", "ip", "kube-proxy").stdout

    # beta loses an endpoint, gamma goes: one partial transaction touching those two Services only.
    slices2 = [SLICES[0], eps("beta", "10.244.1.3", "10.244.1.6")]
    proxier.on_slice("MODIFIED", SLICES[1], slices2[1])
    proxier.on_service("DELETED", SERVICES[2], None)
    proxier.on_slice("DELETED", SLICES[2], None)
    await proxier.sync_proxy_rules()
    partial = proxier.last_nft
    assert partial is not None and not partial.full_sync and applier.transactions == 2
    assert partial.services_written == 1  # beta; gamma has nothing left to write
    assert proxier.last_changes == {"default/beta", "default/gamma"}
    assert "alpha" not in proxier.last_transaction  # an untouched Service is not in the transaction
    assert "add table" not in proxier.last_transaction  # nor are the fixed chains, sets and maps
    chains, sets = kernel(netns)
    want_chains, want_sets = fresh(SERVICES[:2], slices2)
    assert sets == want_sets  # elements: gamma's and beta's third endpoint gone, the rest untouched
    assert "numgen random mod 2 vmap" in nft(netns, "list", "table", "ip", "kube-proxy").stdout
    # The dropped chains are flushed (nothing refers to them, they hold no rule) but still there.
    stale = service_chains(chains) - service_chains(want_chains)
    assert stale and set(partial.stale_chains) == stale and all(chains[c] == 0 for c in stale)
    assert {c: n for c, n in chains.items() if c not in stale} == want_chains

    # A second later, the next sync (even one with no change) deletes them; nothing else changes.
    assert proxier.runner._retry_at is not None  # the proxier asked for that sync itself
    timer.t += 1.0
    await proxier.sync_proxy_rules()
    assert applier.transactions == 3
    assert proxier.last_transaction == "".join(f"delete chain ip kube-proxy {c}\n" for c in sorted(stale))
    assert kernel(netns) == (want_chains, want_sets)

    # Someone deletes the table: the next partial sync fails, the retry is a full sync that repairs it.
    assert nft(netns, "delete", "table", "ip", "kube-proxy").returncode == 0
    slices3 = [eps("alpha", "10.244.1.2", "10.244.1.7"), slices2[1]]
    proxier.on_slice("MODIFIED", SLICES[0], slices3[0])
    before = proxier.last_nft
    await proxier.sync_proxy_rules()
    assert proxier.failures == 1 and proxier.need_full_sync and proxier.last_nft is before
    assert proxier.metrics.registry.get_sample_value("kubeproxy_sync_proxy_rules_nftables_sync_failures_total") == 1
    await proxier.sync_proxy_rules()
    assert proxier.last_nft is not None and proxier.last_nft.full_sync
    assert kernel(netns) == fresh(SERVICES[:2], slices3)
    # Every applied sync was reported for `kubelab trace`; the failed one's events with the retry.
    assert [r["full"] for r in reports] == [True, False, False, True]
    assert reports[-1]["applied"] == [["/registry/endpointslices/default/alpha-abcde", 0]]


async def test_a_restarted_agent_takes_over_the_table(netns: str) -> None:
    from proxytimer import FakeTimer  # the proxier's monotonic time, moved by the test

    timer = FakeTimer(start=1000.0)
    old = listed(NftProxier(CONFIG, NftApplier(netns), timer=timer), [*SERVICES, *SLICES])
    await old.sync_proxy_rules()
    assert old.last_nft is not None

    # A new agent, with gamma gone while none ran: its first (full) sync finds gamma's chains in the
    # kernel, flushes them, and a later sync deletes them.
    new = listed(NftProxier(CONFIG, NftApplier(netns), timer=timer), [*SERVICES[:2], *SLICES[:2]])
    await new.sync_proxy_rules()
    assert new.last_nft is not None and new.last_nft.full_sync and new.last_nft.stale_chains
    assert "delete chain ip kube-proxy filter-input" in new.last_transaction  # base chains recreated once
    _, sets = kernel(netns)
    want = fresh(SERVICES[:2], SLICES[:2])
    assert sets == want[1]
    timer.t += 1.0
    await new.sync_proxy_rules()
    assert kernel(netns) == want


def nat_save(ns: str) -> str:
    return subprocess.run(["ip", "netns", "exec", ns, "iptables-save", "-t", "nat"], capture_output=True, text=True,
                          check=True).stdout


def iptables_chains(ns: str) -> set[str]:
    chains: set[str] = set()
    for table in ("nat", "filter", "mangle"):
        out = subprocess.run(["ip", "netns", "exec", ns, "iptables-save", "-t", table], capture_output=True, text=True,
                             check=True).stdout
        chains |= {line[1:].split(" ", 1)[0] for line in out.splitlines() if line.startswith(":KUBE-")}
    return chains


async def test_switching_modes_removes_the_other_modes_rules(netns: str) -> None:
    """kube-proxy's platformCleanup: started in nftables mode it removes the iptables mode's chains
    (iptables.CleanupLeftovers), started in iptables mode it deletes the kube-proxy tables."""
    ipt = listed(Proxier(CONFIG, IptablesApplier(netns)), [*SERVICES, *SLICES])
    await ipt.sync_proxy_rules()
    await ipt.applier.ensure_canary()
    before = iptables_chains(netns)
    assert {"KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-PROXY-CANARY"} <= before
    assert any(c.startswith("KUBE-SEP-") for c in before)

    to_nft = ProxyAgent(object(), CONFIG, IptablesApplier(netns), proxy_mode="nftables",  # type: ignore[arg-type]
                        nft=NftApplier(netns))
    await to_nft.cleanup_leftovers()
    assert iptables_chains(netns) <= {"KUBE-FIREWALL", "KUBE-KUBELET-CANARY"}  # the kubelet's, left alone
    assert "KUBE-" not in nat_save(netns)  # no jump from PREROUTING/OUTPUT/POSTROUTING is left either
    nftp = listed(NftProxier(CONFIG, NftApplier(netns)), [*SERVICES, *SLICES])
    await nftp.sync_proxy_rules()
    assert kernel(netns) == fresh(SERVICES, SLICES)

    to_ipt = ProxyAgent(object(), CONFIG, IptablesApplier(netns), nft=NftApplier(netns))  # type: ignore[arg-type]
    await to_ipt.cleanup_leftovers()
    assert "No such file or directory" in nft(netns, "list", "table", "ip", "kube-proxy").stderr
    await to_ipt.cleanup_leftovers()  # nothing left to remove is no error
