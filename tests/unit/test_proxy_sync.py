"""The proxier's sync logic, driven through its informer handlers, applied to a RecordingApplier (the
same --noflush bookkeeping iptables-restore does, in memory). No root, no API server, no mocks.

Real iptables (both backends), failures and the canary are in tests/e2e/test_proxy_sync.py.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from proxyobjects import endpoint_slice, ep, listed, port, service
from proxytimer import FakeTimer

from kubelab.models import EndpointSlice, Service
from proxyagent import Proxier, ProxyConfig, render
from proxyagent.apply import ApplyError, RecordingApplier
from proxyagent.hashing import endpoint_chain_name, service_chain_names

CONFIG = ProxyConfig(node_name="node-1", node_ips=("10.240.0.11",), cluster_cidr="10.244.0.0/16")
HTTP = [port("http", 80)]
TARGET = [port("http", 8080)]


def svc(name: str, ip: str) -> Service:
    return service("default", name, cluster_ip=ip, ports=HTTP)


def eps(name: str, *ips: str, **kwargs: object) -> EndpointSlice:
    return endpoint_slice("default", name, [ep(ip, "node-1") for ip in ips], TARGET, **kwargs)  # type: ignore[arg-type]


def svc_chain(name: str) -> str:
    return service_chain_names(f"default/{name}:http", "tcp").svc


def sep_chain(name: str, endpoint: str) -> str:
    return endpoint_chain_name(f"default/{name}:http", "tcp", endpoint)


def declared_nat_chains(payload: str) -> set[str]:
    nat = payload.split("*nat\n", 1)[1]
    return {line[1:].split(" ", 1)[0] for line in nat.splitlines() if line.startswith(":")}


FIXED_NAT = {"KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-MARK-MASQ"}


def make_proxier(objects: list[Service | EndpointSlice], applier: RecordingApplier | None = None,
                 **kwargs: object) -> Proxier:
    """A proxier whose informers listed `objects` and reported synced."""
    return listed(Proxier(CONFIG, applier or RecordingApplier(), **kwargs), objects)  # type: ignore[arg-type]


SERVICES = [svc("alpha", "10.96.0.10"), svc("beta", "10.96.0.11"), svc("gamma", "10.96.0.12")]
SLICES = [eps("alpha", "10.244.1.2"), eps("beta", "10.244.1.3", "10.244.1.4"), eps("gamma", "10.244.1.5")]


async def test_nothing_is_written_before_both_informers_synced() -> None:
    applier = RecordingApplier()
    proxier = Proxier(CONFIG, applier)
    proxier.on_service("ADDED", None, SERVICES[0])
    proxier.on_services_synced()

    assert await proxier.sync_proxy_rules() is None
    assert applier.restores == 0

    proxier.on_slices_synced()
    assert (await proxier.sync_proxy_rules()) is not None
    assert applier.restores == 1


async def test_first_sync_is_full_and_equals_render() -> None:
    applier = RecordingApplier()
    proxier = make_proxier([*SERVICES, *SLICES], applier)

    ruleset = await proxier.sync_proxy_rules()

    assert ruleset is not None and ruleset.full_sync
    # Nothing existed in the (recorded) kernel, so nothing is stale: exactly the pure render.
    assert ruleset.text == render(SERVICES, SLICES, CONFIG).text
    assert applier.restores == 1
    assert "-A INPUT -m conntrack --ctstate NEW -m comment --comment " \
           '"kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES' in await applier.saved()


async def test_partial_sync_writes_only_the_changed_services_chains() -> None:
    applier = RecordingApplier()
    proxier = make_proxier([*SERVICES, *SLICES], applier)
    await proxier.sync_proxy_rules()

    proxier.on_slice("MODIFIED", SLICES[1], eps("beta", "10.244.1.3", "10.244.1.9"))
    ruleset = await proxier.sync_proxy_rules()

    assert ruleset is not None and not ruleset.full_sync
    assert applier.restores == 2
    written = declared_nat_chains(applier.last_payload) - FIXED_NAT
    # beta's SVC chain and its two endpoints' chains are rewritten, the dropped endpoint's chain
    # is flushed and deleted; alpha and gamma are not mentioned at all.
    gone = sep_chain("beta", "10.244.1.4:8080")
    assert written == {svc_chain("beta"), sep_chain("beta", "10.244.1.3:8080"), sep_chain("beta", "10.244.1.9:8080"),
                       gone}
    assert f"-X {gone}\n" in applier.last_payload
    # ...but every service's KUBE-SERVICES jump is rewritten (KUBE-SERVICES is flushed by the restore).
    for name in ("alpha", "beta", "gamma"):
        assert f"-j {svc_chain(name)}\n" in applier.last_payload
    # The recorded kernel now holds exactly what a fresh full render gives.
    current = [SERVICES[0], SERVICES[1], SERVICES[2]]
    slices = [SLICES[0], eps("beta", "10.244.1.3", "10.244.1.9"), SLICES[2]]
    assert await applier.saved() == await _kernel_after_one_full_sync(current, slices)
    assert (ruleset.services_written, ruleset.deleted_chains) == (1, 1)


async def _kernel_after_one_full_sync(services: list[Service], slices: list[EndpointSlice]) -> str:
    fresh = RecordingApplier()
    proxier = make_proxier([*services, *slices], fresh)
    await proxier.sync_proxy_rules()
    return await fresh.saved()


async def test_deleted_service_chains_are_deleted() -> None:
    applier = RecordingApplier()
    proxier = make_proxier([*SERVICES, *SLICES], applier)
    await proxier.sync_proxy_rules()

    proxier.on_service("DELETED", SERVICES[2], None)
    proxier.on_slice("DELETED", SLICES[2], None)
    ruleset = await proxier.sync_proxy_rules()

    assert ruleset is not None and not ruleset.full_sync
    stale = {svc_chain("gamma"), sep_chain("gamma", "10.244.1.5:8080")}
    assert {line[3:] for line in applier.last_payload.splitlines() if line.startswith("-X ")} == stale
    assert not stale & await applier.existing_nat_chains()
    assert "gamma" not in await applier.saved()


async def test_an_update_that_changes_nothing_kube_proxy_reads_requests_no_sync() -> None:
    proxier = make_proxier([*SERVICES, *SLICES])
    await proxier.sync_proxy_rules()

    relabelled = eps("alpha", "10.244.1.2", labels={"team": "blue"})
    proxier.on_slice("MODIFIED", SLICES[0], relabelled)
    assert not proxier.state.has_pending()

    # A change and its undoing cancel out before any sync, as in kube-proxy's change trackers.
    moved = svc("beta", "10.96.0.99")
    proxier.on_service("MODIFIED", SERVICES[1], moved)
    assert proxier.state.has_pending()
    proxier.on_service("MODIFIED", moved, SERVICES[1])
    assert not proxier.state.has_pending()
    queued = proxier.metrics.registry.get_sample_value("kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds")
    assert queued is not None and queued > 0  # the first change did queue a sync


async def test_restarted_agent_converges_and_removes_chains_it_no_longer_owns() -> None:
    kernel = RecordingApplier()  # outlives the agents, like the node's iptables
    first = make_proxier([*SERVICES, *SLICES], kernel)
    await first.sync_proxy_rules()
    assert svc_chain("gamma") in await kernel.existing_nat_chains()

    # gamma is deleted while no agent runs; beta's endpoints change.
    beta = eps("beta", "10.244.1.7")
    second = make_proxier([SERVICES[0], SERVICES[1], SLICES[0], beta], kernel)
    ruleset = await second.sync_proxy_rules()

    assert ruleset is not None and ruleset.full_sync
    assert set(ruleset.text.split("\n")) >= {f"-X {svc_chain('gamma')}", f"-X {sep_chain('gamma', '10.244.1.5:8080')}",
                                             f"-X {sep_chain('beta', '10.244.1.4:8080')}"}
    assert await kernel.saved() == await _kernel_after_one_full_sync([SERVICES[0], SERVICES[1]], [SLICES[0], beta])


async def test_a_full_sync_comes_back_after_the_full_sync_period() -> None:
    timer = FakeTimer(start=1000.0)
    proxier = make_proxier([*SERVICES, *SLICES], timer=timer)
    assert (await proxier.sync_proxy_rules()).full_sync  # type: ignore[union-attr]
    timer.t += 60
    assert not (await proxier.sync_proxy_rules()).full_sync  # type: ignore[union-attr]
    timer.t += 3600
    assert (await proxier.sync_proxy_rules()).full_sync  # type: ignore[union-attr]


async def test_metrics_follow_the_syncs() -> None:
    proxier = make_proxier([*SERVICES, *SLICES])
    await proxier.sync_proxy_rules()
    # The controller stamps RFC 3339 with nanoseconds. Trigger times from before the agent started
    # are ignored (kube-proxy's trackerStartTime), so this one is just after the start, and the
    # sync that applies it comes a second later.
    triggered = datetime.fromtimestamp(time.time(), UTC).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")
    await asyncio.sleep(1.0)
    changed = eps("alpha", "10.244.1.2", "10.244.1.8",
                  annotations={"endpoints.kubernetes.io/last-change-trigger-time": triggered})
    proxier.on_slice("MODIFIED", SLICES[0], changed)
    ruleset = await proxier.sync_proxy_rules()
    assert ruleset is not None

    text = proxier.metrics.exposition().decode()
    samples = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
               for line in text.splitlines() if line and not line.startswith("#")}
    assert samples["kubeproxy_sync_proxy_rules_duration_seconds_count"] == 2
    assert samples["kubeproxy_sync_full_proxy_rules_duration_seconds_count"] == 1
    assert samples["kubeproxy_sync_partial_proxy_rules_duration_seconds_count"] == 1
    assert samples["kubeproxy_sync_proxy_rules_endpoint_changes_total"] == 4  # three listed, one update
    assert samples["kubeproxy_sync_proxy_rules_service_changes_total"] == 3
    assert samples['kubeproxy_sync_proxy_rules_iptables_last{table="nat"}'] == ruleset.nat_rules
    assert samples['kubeproxy_sync_proxy_rules_iptables_total{table="nat"}'] == ruleset.nat_rules_total
    assert samples['kubeproxy_sync_proxy_rules_iptables_total{table="filter"}'] == ruleset.filter_rules
    # One endpoint change, triggered a second before the sync that applied it.
    assert samples["kubeproxy_network_programming_duration_seconds_count"] == 1
    assert 1.0 <= samples["kubeproxy_network_programming_duration_seconds_sum"] < 30.0
    assert samples['kubeproxy_network_programming_duration_seconds_bucket{le="0.5"}'] == 0
    assert samples['kubeproxy_network_programming_duration_seconds_bucket{le="0.0"}'] == 0
    assert samples['kubeproxy_sync_proxy_rules_no_local_endpoints_total{traffic_policy="internal"}'] == 0
    assert samples["kubeproxy_sync_proxy_rules_iptables_restore_failures_total"] == 0
    assert samples["kubeproxy_sync_proxy_rules_last_timestamp_seconds"] == pytest.approx(time.time(), abs=30)


async def test_no_local_endpoints_metric_counts_local_policy_services_without_local_endpoints() -> None:
    local = service("default", "local", cluster_ip="10.96.0.20", ports=[port("http", 80, nodePort=30020)],
                    svc_type="NodePort", externalTrafficPolicy="Local", internalTrafficPolicy="Local")
    remote_only = endpoint_slice("default", "local", [ep("10.244.2.2", "node-2")], TARGET)
    proxier = make_proxier([local, remote_only])
    ruleset = await proxier.sync_proxy_rules()

    assert ruleset is not None
    text = proxier.metrics.exposition().decode()
    assert 'kubeproxy_sync_proxy_rules_no_local_endpoints_total{traffic_policy="internal"} 1.0' in text
    assert 'kubeproxy_sync_proxy_rules_no_local_endpoints_total{traffic_policy="external"} 1.0' in text


async def test_agents_in_one_process_keep_separate_metrics() -> None:
    one = make_proxier([*SERVICES, *SLICES])
    two = make_proxier([SERVICES[0]])
    await one.sync_proxy_rules()
    await one.sync_proxy_rules()
    await two.sync_proxy_rules()

    assert b"kubeproxy_sync_proxy_rules_duration_seconds_count 2.0" in one.metrics.exposition()
    assert b"kubeproxy_sync_proxy_rules_duration_seconds_count 1.0" in two.metrics.exposition()


async def test_a_burst_of_changes_is_coalesced() -> None:
    """burst 2 per min_sync_period: thirty changes in well under a period give at most two syncs
    after the initial one, and the last change is applied by the sync the rate limit allows next. The
    proxier's time is the test's (proxytimer.FakeTimer): nothing here depends on how fast the machine is."""
    applier = RecordingApplier()
    timer = FakeTimer()
    proxier = make_proxier([*SERVICES, *SLICES], applier, min_sync_period=2.0, timer=timer)
    task = asyncio.create_task(proxier.run())
    try:
        await asyncio.wait_for(proxier.synced.wait(), 10)
        await timer.idle()
        initial = proxier.syncs
        started = timer.now()
        previous = SLICES[0]
        for i in range(30):
            changed = eps("alpha", f"10.244.1.{100 + i}")
            await timer.step(lambda old=previous, new=changed: proxier.on_slice("MODIFIED", old, new), advance=0.01)
            previous = changed
        burst_window = timer.now() - started
        during_burst = proxier.syncs - initial
        for _ in range(250):  # 2.5 s: the rate limit allows the next sync
            await timer.step(advance=0.01)
        applied = sep_chain("alpha", "10.244.1.129:8080") in await applier.existing_nat_chains()
        total = proxier.syncs - initial
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    assert burst_window < 2.0, "the burst took longer than a sync period; the bound below would not hold"
    assert 1 <= during_burst <= 2
    assert during_burst <= total <= 3
    assert applied
    assert not proxier.state.has_pending()


async def test_state_file_holds_the_whole_ruleset_after_a_partial_sync(tmp_path: object) -> None:
    from pathlib import Path
    state = Path(str(tmp_path)) / "iptables.rules"
    proxier = make_proxier([*SERVICES, *SLICES], state_file=state)
    await proxier.sync_proxy_rules()
    proxier.on_slice("MODIFIED", SLICES[1], eps("beta", "10.244.1.3"))
    await proxier.sync_proxy_rules()

    expected = render(SERVICES, [SLICES[0], eps("beta", "10.244.1.3"), SLICES[2]], CONFIG)
    assert state.read_text() == expected.text


async def test_state_file_holds_no_deletions_after_a_sync_that_deleted_chains(tmp_path: object) -> None:
    from pathlib import Path
    state = Path(str(tmp_path)) / "iptables.rules"
    proxier = make_proxier([SERVICES[0], SLICES[0]], state_file=state)
    await proxier.sync_proxy_rules()
    proxier.on_slice("MODIFIED", SLICES[0], eps("alpha", "10.244.1.7"))
    ruleset = await proxier.sync_proxy_rules()

    # Every service port was written (the text restored is whole) but one chain was deleted: the file
    # is what the node has, without the restore's `-X`.
    assert ruleset is not None and ruleset.deleted_chains == 1
    assert state.read_text() == render([SERVICES[0]], [eps("alpha", "10.244.1.7")], CONFIG).text
    assert "-X " not in state.read_text()


async def test_state_file_follows_every_sync_of_a_single_service(tmp_path: object) -> None:
    from pathlib import Path
    state = Path(str(tmp_path)) / "iptables.rules"
    proxier = make_proxier([SERVICES[0], SLICES[0]], state_file=state)
    await proxier.sync_proxy_rules()
    first = state.read_text()
    await proxier.force_sync()  # nothing changed: the same rules
    assert state.read_text() == first
    current = SLICES[0]
    for ips in (("10.244.1.2", "10.244.1.8"), ("10.244.1.8",), ("10.244.1.2", "10.244.1.8")):
        new = eps("alpha", *ips)
        proxier.on_slice("MODIFIED", current, new)
        current = new
        await proxier.sync_proxy_rules()
        assert state.read_text() == render([SERVICES[0]], [new], CONFIG).text


def test_chains_of_reads_the_declared_chains_of_one_table_or_all() -> None:
    from proxyagent.apply import chains_of
    saved = ("# Generated by iptables-save\n*filter\n:INPUT ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n"
             "-A INPUT -j KUBE-SERVICES\nCOMMIT\n*nat\n:PREROUTING ACCEPT [3:180]\n:KUBE-SEP-ABC - [0:0]\n"
             "-A KUBE-SEP-ABC -m comment --comment \":KUBE-NOT-A-CHAIN \" -j DNAT --to-destination 1.2.3.4:80\n"
             "COMMIT\n")
    assert chains_of(saved, "nat") == {"PREROUTING", "KUBE-SEP-ABC"}
    assert chains_of(saved, "filter") == {"INPUT", "KUBE-SERVICES"}
    assert chains_of(saved) == {"INPUT", "KUBE-SERVICES", "PREROUTING", "KUBE-SEP-ABC"}
    assert chains_of("") == frozenset()
    # Without iptables-save's comment line, the first line declares a table or a chain.
    assert chains_of("*nat\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n", "nat") == {"PREROUTING"}
    assert chains_of(":KUBE-SEP-A - [0:0]\n:KUBE-SEP-B - [0:0]\n") == {"KUBE-SEP-A", "KUBE-SEP-B"}


def test_health_turns_bad_when_a_queued_sync_waits_too_long() -> None:
    proxier = make_proxier([*SERVICES, *SLICES], sync_period=30.0)
    assert proxier.is_healthy()
    proxier.request_sync()
    queued = proxier.oldest_pending_queued
    assert queued is not None
    assert proxier.is_healthy(now=queued + 59)
    assert not proxier.is_healthy(now=queued + 61)


def test_the_fragment_cache_changes_the_cost_never_the_payload() -> None:
    from test_render import GOLDEN

    from proxyagent.render import render_ports
    from proxyagent.serviceports import build_endpoints_map, build_service_ports
    from proxyagent.servicerules import FragmentCache

    cache = FragmentCache()
    for case in GOLDEN:
        services, slices, config, _ = case.values
        expected = render(services, slices, config).text
        for _ in range(2):  # a miss for every port, then (fresh but equal objects) a hit
            ports = build_service_ports(services, config.ip_family)
            endpoints = build_endpoints_map(slices, node_name=config.node_name, family=config.ip_family)
            assert render_ports(ports, endpoints, config, cache=cache).text == expected, case.id
    assert cache.hits == cache.misses > 0



# --- a partial sync never jumps to a chain that neither it nor the kernel has ----------------------
# Seen in the compose lab: `kubectl expose pod api-1 --type NodePort` made a second Service selecting
# the pods of clusterip-svc; on every node the next partial sync failed with iptables-restore's
# "Chain 'KUBE-SVC-...' does not exist" until the full sync 30 s later.

EXPOSED = service("default", "exposed", cluster_ip="10.96.0.20", ports=[port("http", 80, nodePort=30080)],
                  svc_type="NodePort")
EXPOSED_SLICE = eps("exposed", "10.244.1.2")


class EventsDuringSave(RecordingApplier):
    """The in-memory kernel, whose iptables-save lets the informers deliver `during_save` while it
    runs, as a real iptables-save subprocess does: the sync has taken its changes by then."""

    def __init__(self) -> None:
        super().__init__()
        self.during_save: list[Callable[[], None]] = []

    async def existing_nat_chains(self) -> frozenset[str]:
        while self.during_save:
            self.during_save.pop(0)()
        return await super().existing_nat_chains()


async def test_the_in_memory_kernel_refuses_a_jump_to_a_missing_chain_as_iptables_restore_does() -> None:
    applier = RecordingApplier()
    with pytest.raises(ApplyError, match="Chain 'KUBE-SVC-NOWHERE' does not exist"):
        await applier.restore("*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -j KUBE-SVC-NOWHERE\nCOMMIT\n")
    assert await applier.saved() == ""  # a failed restore changes nothing

    await applier.restore("*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-HERE - [0:0]\n"
                          "-A KUBE-SERVICES -j KUBE-SVC-HERE\nCOMMIT\n")
    before = await applier.saved()
    # --noflush: a chain the kernel has need not be declared again.
    await applier.restore("*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -j KUBE-SVC-HERE\nCOMMIT\n")
    assert await applier.saved() == before
    with pytest.raises(ApplyError, match="Chain 'KUBE-SVC-NOWHERE' does not exist"):
        await applier.restore("*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -j KUBE-SVC-NOWHERE\nCOMMIT\n")
    assert await applier.saved() == before


async def test_a_service_that_arrives_while_a_partial_sync_runs_never_fails_the_restore() -> None:
    applier = EventsDuringSave()
    proxier = make_proxier([SERVICES[0], SLICES[0]], applier)
    await proxier.sync_proxy_rules()

    # alpha's pods change; while that sync reads the kernel's chains, `kubectl expose` adds a NodePort
    # Service over the same pod and the EndpointSlice controller its slice.
    proxier.on_slice("MODIFIED", SLICES[0], eps("alpha", "10.244.1.2", "10.244.1.3"))
    applier.during_save += [lambda: proxier.on_service("ADDED", None, EXPOSED),
                            lambda: proxier.on_slice("ADDED", None, EXPOSED_SLICE)]
    ruleset = await proxier.sync_proxy_rules()

    assert ruleset is not None and not ruleset.full_sync and proxier.failures == 0
    # Whichever sync took the new Service wrote it whole: the kernel is what a full sync makes.
    assert not proxier.state.has_pending()
    assert await applier.saved() == await _kernel_after_one_full_sync(
        [SERVICES[0], EXPOSED], [eps("alpha", "10.244.1.2", "10.244.1.3"), EXPOSED_SLICE])


def test_a_partial_render_writes_every_service_whose_chains_the_kernel_lacks() -> None:
    from proxyagent.render import render_ports
    from proxyagent.serviceports import build_endpoints_map, build_service_ports

    ports = build_service_ports([SERVICES[0], EXPOSED], CONFIG.ip_family)
    endpoints = build_endpoints_map([SLICES[0], EXPOSED_SLICE], node_name=CONFIG.node_name, family=CONFIG.ip_family)
    alpha_only = render([SERVICES[0]], [SLICES[0]], CONFIG)
    exposed = service_chain_names("default/exposed:http", "tcp")
    expected = {exposed.svc, exposed.ext, endpoint_chain_name("default/exposed:http", "tcp", "10.244.1.2:8080")}

    # Only alpha changed, but the kernel holds alpha's chains alone: exposed's are written too.
    ruleset = render_ports(ports, endpoints, CONFIG, changed={"default/alpha"},
                           applied_chains=alpha_only.active_nat_chains)
    declared = declared_nat_chains(ruleset.text)
    assert expected <= declared and svc_chain("alpha") in declared
    assert ruleset.services_written == 2
    # Once the kernel has them, a partial sync of alpha leaves them alone again.
    ruleset = render_ports(ports, endpoints, CONFIG, changed={"default/alpha"},
                           applied_chains=alpha_only.active_nat_chains | expected)
    assert not expected & declared_nat_chains(ruleset.text) and ruleset.services_written == 1
    # Every chain a written rule jumps to is declared in the payload or already in the kernel.
    for changed in ({"default/alpha"}, {"default/exposed"}, set()):
        ruleset = render_ports(ports, endpoints, CONFIG, changed=changed, applied_chains=alpha_only.active_nat_chains)
        targets = set(re.findall(r" -j (KUBE-(?:SVC|SVL|EXT|FW|SEP)-\w+)", ruleset.text))
        assert targets <= declared_nat_chains(ruleset.text) | alpha_only.active_nat_chains, changed
def _versioned(obj: EndpointSlice | Service, revision: int) -> EndpointSlice | Service:
    obj.metadata.resource_version = str(revision)
    return obj


async def test_each_sync_reports_exactly_the_changes_it_applied() -> None:
    """For `kubelab trace`: a sync names the (key, revision) events whose change it applied; an event
    that changed nothing the proxier reads, or that a later event undid before the sync, is in none."""
    reports: list[dict[str, object]] = []
    proxier = make_proxier([*SERVICES, *SLICES])
    proxier.on_synced = reports.append
    await proxier.sync_proxy_rules()
    reports.clear()

    proxier.on_slice("MODIFIED", SLICES[0], _versioned(eps("alpha", "10.244.1.2", labels={"team": "blue"}), 20))
    moved = _versioned(svc("beta", "10.96.0.99"), 21)
    proxier.on_service("MODIFIED", SERVICES[1], moved)
    proxier.on_service("MODIFIED", moved, _versioned(svc("beta", "10.96.0.11"), 22))  # undone
    proxier.on_slice("MODIFIED", SLICES[2], _versioned(eps("gamma", "10.244.1.5", "10.244.1.6"), 23))
    await proxier.sync_proxy_rules()
    assert [r["applied"] for r in reports] == [[["/registry/endpointslices/default/gamma-abcde", 23]]]

    proxier.on_slice("MODIFIED", SLICES[0], _versioned(eps("alpha", "10.244.1.7"), 24))
    await proxier.sync_proxy_rules()
    assert reports[-1]["applied"] == [["/registry/endpointslices/default/alpha-abcde", 24]]


async def test_a_sync_reports_every_version_of_an_object_changed_twice_before_it() -> None:
    """A slice written twice before one sync (a pod's endpoint removed, then another's added): the sync
    applied both writes, so both traces end in it. It reported only the last, and `kubelab trace` of the
    first change never saw its rules applied on that node."""
    reports: list[dict[str, object]] = []
    proxier = make_proxier([*SERVICES, *SLICES])
    proxier.on_synced = reports.append
    await proxier.sync_proxy_rules()
    reports.clear()

    emptied = _versioned(eps("gamma"), 30)
    proxier.on_slice("MODIFIED", SLICES[2], emptied)
    proxier.on_slice("MODIFIED", emptied, _versioned(eps("gamma", "10.244.1.9"), 31))
    await proxier.sync_proxy_rules()
    assert [r["applied"] for r in reports] == [[["/registry/endpointslices/default/gamma-abcde", 30],
                                                ["/registry/endpointslices/default/gamma-abcde", 31]]]
