"""Partial syncs sent as nf_tables netlink batches (proxyagent/nftables/netlink.py) leave the kernel
in the state `nft -f` leaves it in, and in the state a from-scratch apply of the same objects gives
(root, real nft, real kernel).

Three namespaces. Two NftProxiers are fed the same seeded random changes (Services added, removed
and re-added; endpoints added, moved, removed, made local or not ready) over Services of every kind
the renderer writes (ClusterIP, several ports, UDP and SCTP, NodePort, externalIPs, LoadBalancer
with externalTrafficPolicy Local, with source ranges, internalTrafficPolicy Local, ClientIP
affinity, no endpoints): one applies with `nft -f` (NftApplier), the other with LibNftApplier whose
partial syncs go as netlink batches. After every step `nft list table ip kube-proxy` prints the same
text in both; once the stale chains are deleted, the same text as a third namespace where the
current objects' full transaction was applied by `nft -f` from nothing. A kernel refusal of a batch
is reported in nft's words and leaves the table as it was; a table deleted behind the agent's back
makes the next partial sync fail and the retry (a full sync) repairs it. Every namespace is created
with a unique name and deleted in a finally; the applier's thread is ended and checked gone.
"""

from __future__ import annotations

import os
import random
import secrets
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from proxyobjects import endpoint_slice, ep, listed, port, service
from proxytimer import FakeTimer

from kubelab.models import EndpointSlice, Service
from proxyagent import ProxyConfig
from proxyagent.apply import ApplyError
from proxyagent.nftables import render_nft
from proxyagent.nftables.apply import NftApplier
from proxyagent.nftables.libnft import LibNftApplier
from proxyagent.nftproxier import NftProxier

pytestmark = pytest.mark.root

NODE = "node-1"
CONFIG = ProxyConfig(node_name=NODE, node_ips=("10.240.0.11",), cluster_cidr="10.244.0.0/16")


def make_netns() -> str:
    name = f"klnftn-{secrets.token_hex(4)}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    return name


@pytest.fixture
def namespaces() -> Iterator[tuple[str, str, str]]:
    if os.geteuid() != 0:
        pytest.skip("needs root: creates network namespaces (CI runs as root)")
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not on PATH (make system-deps installs Debian's nftables)")
    made: list[str] = []
    try:
        made += [make_netns(), make_netns(), make_netns()]
        yield made[0], made[1], made[2]
    finally:
        for name in made:
            subprocess.run(["ip", "netns", "del", name], check=False)
        listing_ = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
        assert not any(name in listing_ for name in made)


def nft(ns: str, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(["ip", "netns", "exec", ns, "nft", *args], input=stdin, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def listing(ns: str) -> str:
    return nft(ns, "list", "table", "ip", "kube-proxy")


# Run inside a namespace: every rule of the `ip` family as the kernel holds it (chain, expressions,
# userdata; not the handle), one line of hex each, from an NFT_MSG_GETRULE dump.
RULE_DUMP = """
import socket, struct, sys
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12)
s.bind((0, 0))
s.send(struct.pack("=IHHII", 20, (10 << 8) | 7, 0x301, 1, 0) + bytes((2, 0, 0, 0)))
while True:
    buf, off = s.recv(1 << 20), 0
    while off < len(buf):
        size, kind = struct.unpack_from("=IH", buf, off)
        if kind == 3:
            sys.exit(0)
        if kind == 2:
            sys.exit("dump refused")
        attrs, pos, keep = buf[off + 20:off + size], 0, []
        while pos + 4 <= len(attrs):
            alen, atype = struct.unpack_from("=HH", attrs, pos)
            if atype & 0x7FFF in (2, 4, 7):
                keep.append(attrs[pos:pos + alen].hex())
            pos += (alen + 3) & ~3
        print(" ".join(keep))
        off += (size + 3) & ~3
"""


def kernel_rules(ns: str) -> str:
    done = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", RULE_DUMP], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def canonical(text: str) -> list[tuple[str, ...]]:
    """A listing as upstream's tests compare tables: the kernel lists chains and sets in the order
    they were made, and the elements of a hashed set in its own order, which differ between a table
    built step by step and one built at once; the rules of a chain keep their order."""
    blocks: list[tuple[str, ...]] = []
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith("\t") and not line.startswith("\t\t") and line.rstrip().endswith("{"):
            current = [line.strip()]
        elif line == "\t}" and current:
            body = "\n".join(current[1:])
            head, sep, rest = body.partition("elements = { ")
            if sep:
                elements, _, tail = rest.partition(" }")
                body = head + "elements = " + repr(sorted(e.strip() for e in elements.split(","))) + tail
            blocks.append((current[0], body))
            current = []
        elif current:
            current.append(line.strip())
    return sorted(blocks)


def svc(name: str, ip: str, ports: list[dict[str, Any]] | None = None, **kw: Any) -> Service:
    return service("default", name, cluster_ip=ip, ports=ports or [port("http", 80)], **kw)


SERVICES = {s.metadata.name: s for s in [
    svc("plain", "10.96.0.10"),
    svc("two-ports", "10.96.0.11", [port("http", 80), port("dns", 53, "UDP")]),
    svc("sctp", "10.96.0.12", [port("assoc", 9999, "SCTP")]),
    svc("nodeport", "10.96.0.13", [port("http", 80, nodePort=30080)], svc_type="NodePort"),
    svc("external", "10.96.0.14", externalIPs=["192.168.99.14"]),
    svc("lb-local", "10.96.0.15", [port("http", 80, nodePort=30081)], svc_type="LoadBalancer",
        externalTrafficPolicy="Local", healthCheckNodePort=30900, ingress=[{"ip": "5.6.7.15"}]),
    svc("lb-ranges", "10.96.0.16", [port("http", 80, nodePort=30082)], svc_type="LoadBalancer",
        loadBalancerSourceRanges=["203.0.113.0/24", "10.240.0.0/20"], ingress=[{"ip": "5.6.7.16"}]),
    svc("itp-local", "10.96.0.17", internalTrafficPolicy="Local"),
    svc("sticky", "10.96.0.18", sessionAffinity="ClientIP",
        sessionAffinityConfig={"clientIP": {"timeoutSeconds": 600}}),
]}
TARGET_PORTS = {"two-ports": [port("http", 8080), port("dns", 5353, "UDP")], "sctp": [port("assoc", 9999, "SCTP")]}


def random_slice(rng: random.Random, name: str, index: int) -> EndpointSlice | None:
    count = rng.choice([0, 1, 2, 3])
    if count == 0 and rng.random() < 0.5:
        return None
    endpoints = []
    for ip in rng.sample([f"10.244.{index}.{i}" for i in range(1, 7)], count):
        conditions = {"ready": False} if rng.random() < 0.15 else {}
        endpoints.append(ep(ip, NODE if rng.random() < 0.4 else "node-2", **conditions))
    return endpoint_slice("default", name, endpoints, TARGET_PORTS.get(name, [port("http", 8080)]))


def libnft_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("libnft-")]


@pytest.mark.parametrize("seed", range(3))
async def test_random_changes_as_netlink_batches_leave_the_table_nft_leaves(
        namespaces: tuple[str, str, str], seed: int) -> None:
    cli_ns, nl_ns, scratch_ns = namespaces
    rng = random.Random(seed)
    timer = FakeTimer(start=1000.0)  # the proxiers' monotonic time, moved by the test
    services = dict(SERVICES)
    names = sorted(SERVICES)
    slices: dict[str, EndpointSlice] = {}
    for index, name in enumerate(names):
        made = random_slice(rng, name, index)
        if made is not None:
            slices[name] = made
    fast = LibNftApplier(nl_ns, netlink_batches=True)
    try:
        objects: list[Service | EndpointSlice] = [*services.values(), *slices.values()]
        cli = listed(NftProxier(CONFIG, NftApplier(cli_ns), timer=timer), objects)
        net = listed(NftProxier(CONFIG, fast, timer=timer), objects)
        partial = 0

        async def both(step: str) -> None:
            await cli.sync_proxy_rules()
            await net.sync_proxy_rules()
            assert cli.failures == net.failures == 0, step
            assert cli.last_transaction == net.last_transaction, step
            assert listing(nl_ns) == listing(cli_ns), step
            assert kernel_rules(nl_ns) == kernel_rules(cli_ns), step  # the same bytes in the kernel

        await both("full sync")
        assert fast.netlink_transactions == 0  # a full sync goes through libnftables as text
        for step in range(25):
            for name in sorted(rng.sample(names, rng.choice([1, 1, 1, 2, 3]))):
                index = names.index(name)
                old_svc, old_slice = services.get(name), slices.get(name)
                new_svc = None if rng.random() < 0.15 else SERVICES[name]
                new_slice = random_slice(rng, name, index)
                for proxier in (cli, net):
                    if old_svc is not None or new_svc is not None:
                        kind = "DELETED" if new_svc is None else "ADDED" if old_svc is None else "MODIFIED"
                        proxier.on_service(kind, old_svc, new_svc)
                    if old_slice is not None or new_slice is not None:
                        kind = "DELETED" if new_slice is None else "ADDED" if old_slice is None else "MODIFIED"
                        proxier.on_slice(kind, old_slice, new_slice)
                for store, value in ((services, new_svc), (slices, new_slice)):
                    if value is None:
                        store.pop(name, None)
                    else:
                        store[name] = value  # type: ignore[assignment]
            before = fast.netlink_transactions
            await both(f"step {step}")
            assert net.last_nft is not None and not net.last_nft.full_sync
            partial += fast.netlink_transactions > before
            timer.t += 1.0
            await both(f"step {step}: stale chains deleted")
            scratch = render_nft(list(services.values()), list(slices.values()), net.nft_config, first_sync=True)
            nft(scratch_ns, "-f", "-", stdin="delete table ip kube-proxy\n" if step else "")
            nft(scratch_ns, "-f", "-", stdin=scratch.text)
            assert canonical(listing(nl_ns)) == canonical(listing(scratch_ns)), f"step {step}: from scratch"
        # Most partial syncs went as batches; the source-range Service's firewall set (an interval set)
        # sends the syncs that rewrite it through libnftables.
        assert partial >= 10, partial
    finally:
        fast.close()
    assert not libnft_threads()


async def test_a_refused_batch_changes_nothing_and_a_lost_table_is_rebuilt(namespaces: tuple[str, str, str]) -> None:
    cli_ns, nl_ns, _ = namespaces
    fast = LibNftApplier(nl_ns, netlink_batches=True)
    objects: list[Service | EndpointSlice] = [SERVICES["plain"], SERVICES["nodeport"],
                                              endpoint_slice("default", "plain", [ep("10.244.0.2", NODE)],
                                                             [port("http", 8080)])]
    try:
        net = listed(NftProxier(CONFIG, fast), objects)
        await net.sync_proxy_rules()
        before = listing(nl_ns)

        # The kernel refuses the batch (a rule jumping to a chain that is not there): nothing of it
        # is applied, not even the chain its first message added, and nft's words say why.
        with pytest.raises(ApplyError) as refused:
            await fast.transact("add chain ip kube-proxy zz-new\n"
                                "add rule ip kube-proxy zz-new goto no-such-chain\n")
        assert fast.netlink_transactions == 1
        assert "Could not process rule: No such file or directory" in str(refused.value)
        assert "add rule ip kube-proxy zz-new goto no-such-chain" in str(refused.value)
        assert listing(nl_ns) == before

        # Someone deletes the table: the next partial sync (a batch) fails in the kernel; the failure
        # is counted and the retry is a full sync that rebuilds the table.
        nft(nl_ns, "delete", "table", "ip", "kube-proxy")
        new_slice = endpoint_slice("default", "plain", [ep("10.244.0.2", NODE), ep("10.244.0.3")],
                                   [port("http", 8080)])
        net.on_slice("MODIFIED", objects[2], new_slice)  # type: ignore[arg-type]
        await net.sync_proxy_rules()
        assert net.failures == 1 and net.need_full_sync and fast.netlink_transactions == 2
        assert net.metrics.registry.get_sample_value("kubeproxy_sync_proxy_rules_nftables_sync_failures_total") == 1
        await net.sync_proxy_rules()
        assert net.last_nft is not None and net.last_nft.full_sync and net.failures == 1

        cli = listed(NftProxier(CONFIG, NftApplier(cli_ns)), [*objects[:2], new_slice])
        await cli.sync_proxy_rules()
        assert listing(nl_ns) == listing(cli_ns)
    finally:
        fast.close()
    assert not libnft_threads()
