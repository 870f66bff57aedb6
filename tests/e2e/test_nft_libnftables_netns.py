"""libnftables in a thread inside the node's namespace (proxyagent/nftables/libnft.py) leaves the same
kernel state as `nft -f`, and reports and retries a kernel refusal the same way (root, real nft).

Two namespaces, two NftProxiers fed the same events: one applies with `nft -f` (NftApplier), the
other with LibNftApplier. After every step (full sync, partial syncs adding, changing and deleting
Services, the later deletion of stale chains, a table deleted behind the agent's back and repaired)
`nft list table ip kube-proxy` prints the same text in both. Every namespace is created with a
unique name and deleted in a finally; the applier's thread is ended and checked gone.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from proxyobjects import endpoint_slice, ep, listed, port, service
from proxytimer import FakeTimer

from kubelab.models import EndpointSlice, Service
from proxyagent import ProxyConfig
from proxyagent.apply import ApplyError
from proxyagent.nftables import libnft
from proxyagent.nftables.apply import NftApplier
from proxyagent.nftables.libnft import LibNftApplier, nft_applier
from proxyagent.nftproxier import NftProxier

pytestmark = pytest.mark.root

CONFIG = ProxyConfig(node_name="node-1", node_ips=("10.240.0.11",), cluster_cidr="10.244.0.0/16")
HTTP, TARGET = [port("http", 80)], [port("http", 8080)]


def make_netns() -> str:
    name = f"klnftl-{secrets.token_hex(4)}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    return name


@pytest.fixture
def pair() -> Iterator[tuple[str, str]]:
    if os.geteuid() != 0:
        pytest.skip("needs root: creates network namespaces (CI runs as root)")
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not on PATH (make system-deps installs Debian's nftables)")
    made: list[str] = []
    try:
        made += [make_netns(), make_netns()]
        yield made[0], made[1]
    finally:
        for name in made:
            subprocess.run(["ip", "netns", "del", name], check=False)
        listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
        assert not any(name in listing for name in made)


def sh(*argv: str) -> None:
    subprocess.run(argv, check=True, timeout=60)


def listing(ns: str) -> str:
    done = subprocess.run(["ip", "netns", "exec", ns, "nft", "list", "table", "ip", "kube-proxy"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def svc(name: str, ip: str, **kw: object) -> Service:
    return service("default", name, cluster_ip=ip, ports=kw.pop("ports", HTTP), **kw)  # type: ignore[arg-type]


def eps(name: str, *ips: str) -> EndpointSlice:
    return endpoint_slice("default", name, [ep(ip, "node-1") for ip in ips], TARGET)


SERVICES = [svc("alpha", "10.96.0.10"), svc("beta", "10.96.0.11"),
            svc("gamma", "10.96.0.12", svc_type="NodePort", ports=[port("http", 80, nodePort=30080)]),
            svc("delta", "10.96.0.13", sessionAffinity="ClientIP")]
SLICES = [eps("alpha", "10.244.1.2"), eps("beta", "10.244.1.3", "10.244.1.4", "10.244.1.6"),
          eps("gamma", "10.244.1.5"), eps("delta", "10.244.1.8", "10.244.1.9")]


def libnft_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("libnft-")]


async def test_libnftables_leaves_the_kernel_state_nft_f_leaves(pair: tuple[str, str]) -> None:
    cli_ns, lib_ns = pair
    timer = FakeTimer(start=1000.0)
    lib = LibNftApplier(lib_ns)
    try:
        cli = listed(NftProxier(CONFIG, NftApplier(cli_ns), timer=timer), [*SERVICES, *SLICES])
        fast = listed(NftProxier(CONFIG, lib, timer=timer), [*SERVICES, *SLICES])

        async def both(step: str) -> None:
            await cli.sync_proxy_rules()
            await fast.sync_proxy_rules()
            assert cli.failures == fast.failures == 0, step
            assert cli.last_transaction == fast.last_transaction, step
            assert listing(lib_ns) == listing(cli_ns), step

        await both("full sync")
        assert "numgen random mod 3 vmap" in listing(lib_ns) and lib.transactions == 1

        def event(kind: str, old: Service | EndpointSlice | None, new: Service | EndpointSlice | None) -> None:
            for proxier in (cli, fast):
                if isinstance(old or new, Service):
                    proxier.on_service(kind, old, new)  # type: ignore[arg-type]
                else:
                    proxier.on_slice(kind, old, new)  # type: ignore[arg-type]

        event("MODIFIED", SLICES[1], eps("beta", "10.244.1.3", "10.244.1.6"))
        event("DELETED", SERVICES[2], None)
        event("DELETED", SLICES[2], None)
        await both("partial: an endpoint and a NodePort Service gone")
        assert fast.last_nft is not None and not fast.last_nft.full_sync and fast.last_nft.stale_chains
        timer.t += 1.0
        await both("stale chains deleted")
        epsilon = svc("epsilon", "10.96.0.14", svc_type="NodePort", ports=[port("http", 80, nodePort=30081)])
        event("ADDED", None, epsilon)
        event("ADDED", None, eps("epsilon", "10.244.1.10"))
        event("MODIFIED", SLICES[3], eps("delta", "10.244.1.9"))
        await both("partial: a Service added, an affinity endpoint gone")
        assert fast.last_nft is not None and not fast.last_nft.full_sync
        timer.t += 1.0
        await both("stale chains deleted again")
        assert lib.transactions == 5
    finally:
        lib.close()
    assert not libnft_threads()  # the thread inside the namespace is gone


async def test_a_kernel_refusal_is_reported_and_retried_as_a_full_sync(pair: tuple[str, str]) -> None:
    cli_ns, lib_ns = pair
    lib = LibNftApplier(lib_ns)
    try:
        fast = listed(NftProxier(CONFIG, lib), [*SERVICES, *SLICES])
        await fast.sync_proxy_rules()
        before = listing(lib_ns)

        # nft refuses the whole batch (a rule jumping to a chain that is not there): nothing applied.
        with pytest.raises(ApplyError) as refused:
            await lib.transact("add chain ip kube-proxy zz-new\n"
                               "add rule ip kube-proxy zz-new goto no-such-chain\n")
        assert "Could not process rule: No such file or directory" in str(refused.value)
        assert listing(lib_ns) == before

        # Someone deletes the table: the next partial sync's element deletes fail in the kernel; the
        # failure is counted, and the retry is a full sync that rebuilds the table.
        sh("ip", "netns", "exec", lib_ns, "nft", "delete", "table", "ip", "kube-proxy")
        fast.on_slice("MODIFIED", SLICES[0], eps("alpha", "10.244.1.2", "10.244.1.7"))
        previous = fast.last_nft
        await fast.sync_proxy_rules()
        assert fast.failures == 1 and fast.need_full_sync and fast.last_nft is previous
        assert fast.metrics.registry.get_sample_value(
            "kubeproxy_sync_proxy_rules_nftables_sync_failures_total") == 1
        await fast.sync_proxy_rules()
        assert fast.last_nft is not None and fast.last_nft.full_sync

        # Same objects through `nft -f` in the other namespace: the same table.
        cli = listed(NftProxier(CONFIG, NftApplier(cli_ns)),
                     [*SERVICES, eps("alpha", "10.244.1.2", "10.244.1.7"), *SLICES[1:]])
        await cli.sync_proxy_rules()
        assert listing(lib_ns) == listing(cli_ns)
    finally:
        lib.close()
    assert not libnft_threads()


async def test_a_recreated_namespace_is_followed_and_a_missing_one_refused(
        pair: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    _, lib_ns = pair
    lib = nft_applier(lib_ns)
    assert isinstance(lib, LibNftApplier)  # Debian's libnftables1 is installed with nftables
    try:
        await lib.transact("add table ip kube-proxy\n")
        sh("ip", "netns", "del", lib_ns)
        with pytest.raises(ApplyError):  # as `ip netns exec` would fail
            await lib.transact("add table ip kube-proxy\n")
        sh("ip", "netns", "add", lib_ns)
        await lib.transact("add table ip kube-proxy\nadd chain ip kube-proxy again\n")
        assert "chain again" in listing(lib_ns)  # written in the new namespace, not the old one
    finally:
        lib.close()
    assert not libnft_threads()
    assert isinstance(nft_applier(lib_ns, library=False), NftApplier)
    assert not isinstance(nft_applier(lib_ns, library=False), LibNftApplier)
    monkeypatch.setattr(libnft, "LIBRARY", "libnftables-not-installed.so.9")
    assert not isinstance(nft_applier(lib_ns), LibNftApplier)  # no library: `nft -f`


def rss() -> int:
    """This process's resident memory, bytes."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) << 10
    raise AssertionError("no VmRSS in /proc/self/status")


async def test_the_agent_keeps_no_copy_of_the_table_after_a_full_sync(pair: tuple[str, str]) -> None:
    """A full sync's transaction grows libnftables' heap (nft's cache of the whole table) in the library's
    thread: ~0.5 GiB at 10k Services, ~50 MiB at 1k; an agent that kept the context, and the freed heap,
    held it between full syncs for nothing (BENCHMARKS.md)."""
    _, lib_ns = pair
    count = 1000
    services = [svc(f"s{i}", f"10.96.{4 + i // 250}.{i % 250 + 1}") for i in range(count)]
    slices = [eps(f"s{i}", *(f"10.244.{2 + i // 80}.{(i % 80) * 3 + k + 1}" for k in range(3)))
              for i in range(count)]
    lib = nft_applier(lib_ns)  # what the agent uses: partial syncs as netlink batches
    assert isinstance(lib, LibNftApplier)
    try:
        agent = listed(NftProxier(CONFIG, lib), [*services, *slices])
        await lib.transact("add table ip kube-proxy\n")  # the thread and its first context made
        before = rss()
        await agent.sync_proxy_rules()
        held = rss() - before
        assert agent.failures == 0 and agent.last_nft is not None and agent.last_nft.full_sync
        assert "10.96.7.250" in listing(lib_ns)  # the last Service's ClusterIP: the whole table is there
        # What stays is the agent's own (its model, last transaction and ruleset: ~13 MiB here), not the
        # heap the transaction grew in the library's thread (64 MiB held when the context was kept).
        assert held < 32 << 20, f"the agent holds {held / 2**20:.0f} MiB more after the full sync"

        # The partial syncs after it (netlink batches, and libnftables as text) still apply.
        agent.on_slice("MODIFIED", slices[7], eps("s7", "10.244.9.9"))
        await agent.sync_proxy_rules()
        assert agent.failures == 0 and agent.last_nft is not None and not agent.last_nft.full_sync
        assert lib.netlink_transactions == 1
        lib.netlink_batches = False
        agent.on_slice("MODIFIED", slices[8], eps("s8", "10.244.9.10"))
        await agent.sync_proxy_rules()
        assert agent.failures == 0 and lib.netlink_transactions == 1
        table = listing(lib_ns)
        assert "10.244.9.9" in table and "10.244.9.10" in table
    finally:
        lib.close()
    assert not libnft_threads()


async def test_the_library_thread_and_nft_run_at_the_niceness_given(pair: tuple[str, str]) -> None:
    """`kubelab up`'s nodes write their rules at nice 19 (launcher/defaults.UP_RULES_NICE): the thread that
    makes the library's calls, and every `nft` the applier starts, run at the niceness it is given."""
    cli_ns, lib_ns = pair
    lib = LibNftApplier(lib_ns, nice=15)
    try:
        await lib.transact("add table ip kube-proxy\n")
        [thread] = [t for t in threading.enumerate() if t.name.startswith(f"libnft-{lib_ns}")]
        stat = Path(f"/proc/self/task/{thread.native_id}/stat").read_text()
        assert int(stat.rsplit(")", 1)[1].split()[16]) == 15  # field 19: nice
        assert "table ip kube-proxy" in listing(lib_ns)
    finally:
        lib.close()
    cli = NftApplier(cli_ns, nice=15)
    assert cli.command("list", "tables")[:3] == ["nice", "-n", "15"]
    await cli.transact("add table ip kube-proxy\n")
    assert "table ip kube-proxy" in listing(cli_ns)
