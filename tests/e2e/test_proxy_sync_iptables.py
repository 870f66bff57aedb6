"""The proxier against real iptables (root), on both backends, each in a network namespace of its own:
partial syncs, stale chains, a restore that really fails, a restarted agent, the iptables canary.

Every namespace is created here with a unique name and deleted in a finally, whatever happened.
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import shutil
import subprocess
from collections.abc import Callable, Iterator

import pytest
from proxyobjects import endpoint_slice, ep, listed, port, service

from kubelab.models import EndpointSlice, Service
from proxyagent import Proxier, ProxyConfig
from proxyagent.apply import ApplyError, IptablesApplier, RecordingApplier
from proxyagent.hashing import endpoint_chain_name, service_chain_names

pytestmark = pytest.mark.root

BACKENDS = ["iptables-nft", "iptables-legacy"]
CONFIG = ProxyConfig(node_name="node-1", node_ips=("10.240.0.11",), cluster_cidr="10.244.0.0/16")
HTTP, TARGET = [port("http", 80)], [port("http", 8080)]


@pytest.fixture
def netns() -> Iterator[str]:
    yield from _netns()


@pytest.fixture
def other_netns() -> Iterator[str]:
    yield from _netns()


def _netns() -> Iterator[str]:
    if os.geteuid() != 0:
        pytest.skip("needs root: creates network namespaces (CI runs as root)")
    for tool in ("ip", *BACKENDS):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not on PATH")
    name = f"klp-{secrets.token_hex(4)}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)
        assert name not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout


def iptables(ns: str, backend: str, *args: str, check: bool = True) -> str:
    return subprocess.run(["ip", "netns", "exec", ns, backend, "-w", "5", *args], capture_output=True, text=True,
                          check=check).stdout


def nat_save(ns: str, backend: str) -> str:
    return subprocess.run(["ip", "netns", "exec", ns, f"{backend}-save", "-t", "nat"], capture_output=True,
                          text=True, check=True).stdout


def _rules(save: str) -> list[str]:
    return [line for line in save.splitlines() if not line.startswith("#")]


def service_chains_in_kernel(ns: str, backend: str) -> set[str]:
    return set(re.findall(r"^:(KUBE-(?:SVC|SEP|SVL|EXT|FW)-\w+) ", nat_save(ns, backend), re.MULTILINE))


def svc(name: str, ip: str) -> Service:
    return service("default", name, cluster_ip=ip, ports=HTTP)


def eps(name: str, *ips: str) -> EndpointSlice:
    return endpoint_slice("default", name, [ep(ip, "node-1") for ip in ips], TARGET)


def chains(name: str, *endpoints: str) -> set[str]:
    svc_port = f"default/{name}:http"
    return {service_chain_names(svc_port, "tcp").svc} | {endpoint_chain_name(svc_port, "tcp", e) for e in endpoints}


SERVICES = [svc("alpha", "10.96.0.10"), svc("beta", "10.96.0.11"), svc("gamma", "10.96.0.12")]
SLICES = [eps("alpha", "10.244.1.2"), eps("beta", "10.244.1.3", "10.244.1.4"), eps("gamma", "10.244.1.5")]


def proxier_for(ns: str, backend: str, objects: list[Service | EndpointSlice], **kwargs: object) -> Proxier:
    return listed(Proxier(CONFIG, IptablesApplier(ns, backend=backend), **kwargs), objects)  # type: ignore[arg-type]


def sample(proxier: Proxier, name: str) -> float:
    value = proxier.metrics.registry.get_sample_value(name)
    return 0.0 if value is None else value


@pytest.mark.parametrize("backend", BACKENDS)
async def test_partial_syncs_and_stale_chains_on_real_iptables(netns: str, backend: str) -> None:
    proxier = proxier_for(netns, backend, [*SERVICES, *SLICES])
    applier = proxier.applier
    assert isinstance(applier, IptablesApplier)

    assert (await proxier.sync_proxy_rules()) is not None
    assert service_chains_in_kernel(netns, backend) == (
        chains("alpha", "10.244.1.2:8080") | chains("beta", "10.244.1.3:8080", "10.244.1.4:8080")
        | chains("gamma", "10.244.1.5:8080"))

    proxier.on_slice("MODIFIED", SLICES[1], eps("beta", "10.244.1.3"))
    proxier.on_service("DELETED", SERVICES[2], None)
    proxier.on_slice("DELETED", SLICES[2], None)
    ruleset = await proxier.sync_proxy_rules()

    assert ruleset is not None and not ruleset.full_sync and ruleset.deleted_chains == 3
    assert applier.restores == 2  # exactly one iptables-restore per sync
    assert service_chains_in_kernel(netns, backend) == (chains("alpha", "10.244.1.2:8080")
                                                         | chains("beta", "10.244.1.3:8080"))
    nat = nat_save(netns, backend)
    assert "10.96.0.12" not in nat and "10.244.1.4" not in nat
    # A full sync again (say, after an hour) adds no second copy of any jump.
    proxier.need_full_sync = True
    assert (await proxier.sync_proxy_rules()) is not None
    for chain, target in (("PREROUTING", "KUBE-SERVICES"), ("OUTPUT", "KUBE-SERVICES"),
                          ("POSTROUTING", "KUBE-POSTROUTING")):
        rules = [r for r in nat_save(netns, backend).splitlines() if r.startswith(f"-A {chain} ")]
        assert [r for r in rules if r.endswith(f"-j {target}")] == rules and len(rules) == 1, rules


class EventsDuringSave(IptablesApplier):
    """Real iptables, whose iptables-save lets the informers deliver `during_save` while it runs,
    as they do between a sync's start and its render (the subprocess is awaited on the loop)."""

    def __init__(self, netns: str, *, backend: str) -> None:
        super().__init__(netns, backend=backend)
        self.during_save: list[Callable[[], None]] = []

    async def existing_nat_chains(self) -> frozenset[str]:
        save = asyncio.ensure_future(super().existing_nat_chains())
        await asyncio.sleep(0)  # the save is under way
        while self.during_save:
            self.during_save.pop(0)()
        return await save


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_nodeport_service_added_during_a_partial_sync_never_fails_the_restore(netns: str, backend: str) -> None:
    # The compose lab's `kubectl expose pod api-1 --type NodePort`: a second Service over the pods of
    # one that is already programmed; on every node the partial sync failed on "Chain
    # 'KUBE-SVC-...' does not exist" and the rules waited 30 s for the full sync.
    applier = EventsDuringSave(netns, backend=backend)
    proxier = listed(Proxier(CONFIG, applier), [SERVICES[0], SLICES[0]])
    await proxier.sync_proxy_rules()
    exposed = service("default", "exposed", cluster_ip="10.96.0.20", ports=[port("http", 80, nodePort=30080)],
                      svc_type="NodePort")
    exposed_slice = eps("exposed", "10.244.1.2")

    proxier.on_slice("MODIFIED", SLICES[0], eps("alpha", "10.244.1.2", "10.244.1.3"))
    applier.during_save += [lambda: proxier.on_service("ADDED", None, exposed),
                            lambda: proxier.on_slice("ADDED", None, exposed_slice)]
    ruleset = await proxier.sync_proxy_rules()

    assert ruleset is not None and not ruleset.full_sync
    assert proxier.failures == 0 and not proxier.state.has_pending()
    assert sample(proxier, "kubeproxy_sync_proxy_rules_iptables_restore_failures_total") == 0
    ext = service_chain_names("default/exposed:http", "tcp").ext
    assert service_chains_in_kernel(netns, backend) == (
        chains("alpha", "10.244.1.2:8080", "10.244.1.3:8080") | chains("exposed", "10.244.1.2:8080") | {ext})
    assert f"--dport 30080 -j {ext}" in nat_save(netns, backend)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_the_in_memory_kernel_refuses_the_jumps_the_real_one_refuses(netns: str, backend: str) -> None:
    kernel, memory = IptablesApplier(netns, backend=backend), RecordingApplier()
    declared = "*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-HERE - [0:0]\n-A KUBE-SERVICES -j KUBE-SVC-HERE\nCOMMIT\n"
    noflush = "*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -j KUBE-SVC-HERE\nCOMMIT\n"
    missing = "*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -j KUBE-SVC-NOWHERE\nCOMMIT\n"
    deleted = "*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-HERE - [0:0]\n-A KUBE-SERVICES -j KUBE-SVC-HERE\n" \
              "-X KUBE-SVC-HERE\nCOMMIT\n"
    for payload, accepted in ((missing, False), (declared, True), (noflush, True), (missing, False),
                              (deleted, False)):
        outcomes = []
        for applier in (kernel, memory):
            try:
                await applier.restore(payload)
                outcomes.append(True)
            except ApplyError:
                outcomes.append(False)
        assert outcomes == [accepted, accepted], payload


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_failed_restore_is_retried_as_a_full_sync(netns: str, backend: str) -> None:
    proxier = proxier_for(netns, backend, [*SERVICES, *SLICES], sync_period=3600.0)
    await proxier.sync_proxy_rules()
    gamma = service_chain_names("default/gamma:http", "tcp").svc
    # Someone else's rule jumps to gamma's chain: deleting the chain must fail in the kernel.
    iptables(netns, backend, "-t", "nat", "-A", "OUTPUT", "-d", "192.0.2.99", "-j", gamma)
    before = nat_save(netns, backend)

    proxier.on_service("DELETED", SERVICES[2], None)
    proxier.on_slice("DELETED", SLICES[2], None)
    proxier.on_slice("MODIFIED", SLICES[0], eps("alpha", "10.244.1.2", "10.244.1.9"))
    assert await proxier.sync_proxy_rules() is None

    assert proxier.need_full_sync
    assert sample(proxier, "kubeproxy_sync_proxy_rules_iptables_restore_failures_total") == 1
    assert sample(proxier, "kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total") == 1
    assert sample(proxier, "kubeproxy_sync_partial_proxy_rules_duration_seconds_count") == 1
    # iptables-restore commits a table whole or not at all: the kernel is as it was (the save's "# Generated
    # on" / "# Completed on" comments carry the time of day, which may have ticked on a loaded machine).
    assert _rules(nat_save(netns, backend)) == _rules(before)
    # The runner was told to retry after sync_period.
    assert proxier.runner._retry_at is not None

    iptables(netns, backend, "-t", "nat", "-D", "OUTPUT", "-d", "192.0.2.99", "-j", gamma)
    ruleset = await proxier.sync_proxy_rules()

    assert ruleset is not None and ruleset.full_sync  # the checked-out changes were lost: full
    assert not proxier.need_full_sync
    assert service_chains_in_kernel(netns, backend) == (
        chains("alpha", "10.244.1.2:8080", "10.244.1.9:8080") | chains("beta", "10.244.1.3:8080", "10.244.1.4:8080"))
    assert sample(proxier, "kubeproxy_sync_proxy_rules_iptables_restore_failures_total") == 1


async def test_a_vanished_namespace_is_a_failed_sync(netns: str) -> None:
    proxier = proxier_for(f"{netns}-gone", "iptables-nft", [*SERVICES, *SLICES])

    assert await proxier.sync_proxy_rules() is None
    assert proxier.failures == 1 and proxier.need_full_sync and not proxier.synced.is_set()
    # A full sync fails at its first step (the jumps), before any restore.
    assert sample(proxier, "kubeproxy_sync_proxy_rules_iptables_restore_failures_total") == 0
    assert sample(proxier, "kubeproxy_sync_full_proxy_rules_duration_seconds_count") == 1


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_restarted_agent_converges(netns: str, backend: str) -> None:
    first = proxier_for(netns, backend, [*SERVICES, *SLICES])
    await first.sync_proxy_rules()

    # The agent restarts; meanwhile gamma was deleted and beta lost an endpoint.
    second = proxier_for(netns, backend, [SERVICES[0], SERVICES[1], SLICES[0], eps("beta", "10.244.1.3")])
    ruleset = await second.sync_proxy_rules()

    assert ruleset is not None and ruleset.full_sync and ruleset.deleted_chains == 3
    assert service_chains_in_kernel(netns, backend) == (chains("alpha", "10.244.1.2:8080")
                                                         | chains("beta", "10.244.1.3:8080"))
    assert len([r for r in nat_save(netns, backend).splitlines() if r.startswith("-A PREROUTING ")]) == 1


@pytest.mark.parametrize("backend", BACKENDS)
async def test_flushed_iptables_are_put_back_by_the_canary(netns: str, backend: str) -> None:
    proxier = proxier_for(netns, backend, [*SERVICES, *SLICES], sync_period=0.3)
    task = asyncio.create_task(proxier.run())
    try:
        await asyncio.wait_for(proxier.synced.wait(), 30)

        async def canary_planted() -> None:
            while "KUBE-PROXY-CANARY" not in iptables(netns, backend, "-t", "mangle", "-S"):
                await asyncio.sleep(0.1)

        await asyncio.wait_for(canary_planted(), 30)
        syncs = proxier.syncs
        for table in ("mangle", "nat", "filter"):  # what an admin's `iptables -F; iptables -X` does
            iptables(netns, backend, "-t", table, "-F")
            iptables(netns, backend, "-t", table, "-X")
        assert not service_chains_in_kernel(netns, backend)

        async def restored() -> None:
            while proxier.syncs == syncs or not service_chains_in_kernel(netns, backend):
                await asyncio.sleep(0.1)

        await asyncio.wait_for(restored(), 30)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    assert proxier.last_ruleset is not None and proxier.last_ruleset.full_sync
    assert service_chains_in_kernel(netns, backend) == (
        chains("alpha", "10.244.1.2:8080") | chains("beta", "10.244.1.3:8080", "10.244.1.4:8080")
        | chains("gamma", "10.244.1.5:8080"))
    assert "-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES" in \
        nat_save(netns, backend)


def saved_rules(ns: str, backend: str) -> list[str]:
    """iptables-save of filter and nat without its comments and counters: the rules a user reads."""
    text = subprocess.run(["ip", "netns", "exec", ns, f"{backend}-save"], capture_output=True, text=True,
                          check=True).stdout
    return [re.sub(r" \[\d+:\d+\]$", "", line) for line in text.splitlines() if not line.startswith("#")]


@pytest.mark.parametrize("backend", BACKENDS)
async def test_delta_syncs_leave_the_kernel_as_kube_proxys_payloads_do(netns: str, other_netns: str,
                                                                       backend: str) -> None:
    """Two agents, one with --delta-sync, each in its own namespace, through the same changes:
    after every sync iptables-save shows the same rules in both, though the delta restored less."""
    delta = proxier_for(netns, backend, [*SERVICES, *SLICES], delta_sync=True)
    plain = proxier_for(other_netns, backend, [*SERVICES, *SLICES])
    changes: list[list[tuple[str, Service | EndpointSlice | None, Service | EndpointSlice | None]]] = [
        [],  # the first, full sync
        [("MODIFIED", SLICES[1], eps("beta", "10.244.1.3", "10.244.1.9"))],  # endpoints only
        [("ADDED", None, svc("delta", "10.96.0.13")), ("ADDED", None, eps("delta", "10.244.1.6"))],
        [("MODIFIED", SLICES[2], eps("gamma"))],  # no endpoints: REJECT in filter
        [("DELETED", SERVICES[0], None), ("DELETED", SLICES[0], None)],
        [("MODIFIED", eps("gamma"), SLICES[2])],
    ]
    sizes, payloads = [], []
    for batch in changes:
        for proxier in (delta, plain):
            for event, old, new in batch:
                if isinstance(old or new, Service):
                    proxier.on_service(event, old, new)  # type: ignore[arg-type]
                else:
                    proxier.on_slice(event, old, new)  # type: ignore[arg-type]
            assert await proxier.sync_proxy_rules() is not None
        assert saved_rules(netns, backend) == saved_rules(other_netns, backend)
        sizes.append((delta.last_payload.count("\n"), plain.last_payload.count("\n")))
        payloads.append(delta.last_payload)
    # The full sync writes the same; the endpoints-only change leaves KUBE-SERVICES and filter out.
    assert sizes[0][0] == sizes[0][1] and all(d < p for d, p in sizes[1:]), sizes
    assert "-A KUBE-SERVICES" not in payloads[1] and "*filter" not in payloads[1]
    assert "-j REJECT" in payloads[3]
    # gamma has endpoints again: its ClusterIP jumps to its service chain (as iptables-save prints it).
    assert any(r.startswith("-A KUBE-SERVICES -d 10.96.0.12/32") and r.endswith(f"-j {chains('gamma').pop()}")
               for r in saved_rules(netns, backend))
