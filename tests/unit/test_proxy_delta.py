"""Delta syncs (`--delta-sync`): a partial sync leaves out the shared chains the kernel already holds,
and the kernel ends up exactly where kube-proxy's full partial payload would have left it.

Driven through the proxier's informer handlers onto RecordingAppliers (iptables-restore --noflush
bookkeeping in memory). The same on real iptables, both backends: tests/e2e/test_proxy_sync_iptables.py.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from proxyobjects import endpoint_slice, ep, listed, port, service

from kubelab.models import EndpointSlice, Service
from proxyagent import Proxier, ProxyConfig
from proxyagent.apply import RecordingApplier
from proxyagent.delta import minimize, shared_rules
from proxyagent.hashing import endpoint_chain_name, service_chain_names

CONFIG = ProxyConfig(node_name="node-1", node_ips=("10.240.0.11",), cluster_cidr="10.244.0.0/16")
HTTP, TARGET = [port("http", 80)], [port("http", 8080)]


def svc(name: str, ip: str) -> Service:
    return service("default", name, cluster_ip=ip, ports=HTTP)


def eps(name: str, *ips: str) -> EndpointSlice:
    return endpoint_slice("default", name, [ep(ip, "node-1") for ip in ips], TARGET)


SERVICES = [svc("alpha", "10.96.0.10"), svc("beta", "10.96.0.11"), svc("gamma", "10.96.0.12")]
SLICES = [eps("alpha", "10.244.1.2"), eps("beta", "10.244.1.3", "10.244.1.4"), eps("gamma", "10.244.1.5")]


def make_proxier(objects: list[Service | EndpointSlice], *, delta_sync: bool) -> Proxier:
    return listed(Proxier(CONFIG, RecordingApplier(), delta_sync=delta_sync), objects)


def declared(payload: str, table: str) -> set[str]:
    if f"*{table}\n" not in payload:
        return set()
    section = payload.split(f"*{table}\n", 1)[1].split("COMMIT\n", 1)[0]
    return {line[1:].split(" ", 1)[0] for line in section.splitlines() if line.startswith(":")}


async def kernel(proxier: Proxier) -> str:
    assert isinstance(proxier.applier, RecordingApplier)
    return await proxier.applier.saved()


async def test_an_endpoint_change_restores_only_that_services_chains() -> None:
    delta, plain = (make_proxier([*SERVICES, *SLICES], delta_sync=d) for d in (True, False))
    for p in (delta, plain):
        await p.sync_proxy_rules()
    # The first sync is full either way: the same payload, every shared chain in it.
    assert delta.last_payload == plain.last_payload
    assert {"KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-MARK-MASQ"} <= declared(delta.last_payload,
                                                                                                 "nat")

    for p in (delta, plain):
        p.on_slice("MODIFIED", SLICES[1], eps("beta", "10.244.1.3", "10.244.1.9"))
        await p.sync_proxy_rules()

    svc_port = "default/beta:http"
    beta = {service_chain_names(svc_port, "tcp").svc,
            *(endpoint_chain_name(svc_port, "tcp", e) for e in ("10.244.1.3:8080", "10.244.1.9:8080"))}
    gone = endpoint_chain_name(svc_port, "tcp", "10.244.1.4:8080")
    # kube-proxy's payload rewrites KUBE-SERVICES and the filter table; the delta leaves them out.
    assert declared(plain.last_payload, "nat") == beta | {gone, "KUBE-SERVICES", "KUBE-NODEPORTS",
                                                           "KUBE-POSTROUTING", "KUBE-MARK-MASQ"}
    assert declared(delta.last_payload, "nat") == beta | {gone}
    assert "*filter" not in delta.last_payload and "-A KUBE-SERVICES" not in delta.last_payload
    assert f"-X {gone}\n" in delta.last_payload
    # The Ruleset is kube-proxy's whole payload either way; only what was restored differs.
    assert delta.last_ruleset is not None and delta.last_ruleset.text == plain.last_payload
    assert await kernel(delta) == await kernel(plain)


async def test_a_new_service_rewrites_kube_services_in_nat_but_not_the_filter_table() -> None:
    delta = make_proxier([*SERVICES, *SLICES], delta_sync=True)
    await delta.sync_proxy_rules()

    delta.on_service("ADDED", None, svc("delta", "10.96.0.13"))
    delta.on_slice("ADDED", None, eps("delta", "10.244.1.6"))
    await delta.sync_proxy_rules()

    assert "KUBE-SERVICES" in declared(delta.last_payload, "nat")
    assert '-d 10.96.0.13 --dport 80 -j KUBE-SVC-' in delta.last_payload
    assert "KUBE-NODEPORTS" not in declared(delta.last_payload, "nat")
    assert "*filter" not in delta.last_payload


async def test_a_service_losing_its_endpoints_rewrites_the_filter_table() -> None:
    delta, plain = (make_proxier([*SERVICES, *SLICES], delta_sync=d) for d in (True, False))
    for p in (delta, plain):
        await p.sync_proxy_rules()
        p.on_slice("MODIFIED", SLICES[2], eps("gamma"))
        await p.sync_proxy_rules()

    # gamma's traffic is now REJECTed in filter's KUBE-SERVICES and no longer jumps from nat's.
    assert declared(delta.last_payload, "filter") == {"KUBE-SERVICES"}
    assert '"default/gamma:http has no endpoints" -m tcp -p tcp -d 10.96.0.12 --dport 80 -j REJECT' \
        in delta.last_payload
    assert "KUBE-SERVICES" in declared(delta.last_payload, "nat")
    assert await kernel(delta) == await kernel(plain)


async def test_full_syncs_write_everything_and_repair_a_hand_edited_shared_chain() -> None:
    delta = make_proxier([*SERVICES, *SLICES], delta_sync=True)
    await delta.sync_proxy_rules()
    applier = delta.applier
    assert isinstance(applier, RecordingApplier)
    wanted = await applier.saved()
    applier._state["nat"]["KUBE-SERVICES"] = []  # someone flushed KUBE-SERVICES by hand

    delta.on_slice("MODIFIED", SLICES[0], eps("alpha", "10.244.1.7"))
    await delta.sync_proxy_rules()
    assert "KUBE-SERVICES" not in declared(delta.last_payload, "nat")  # the delta does not notice...

    delta.need_full_sync = True  # ...the next full sync (hourly, or after a failure) does
    delta.on_slice("MODIFIED", eps("alpha", "10.244.1.7"), SLICES[0])
    ruleset = await delta.sync_proxy_rules()
    assert ruleset is not None and ruleset.full_sync and delta.last_payload == ruleset.text
    assert await applier.saved() == wanted


def test_minimize_drops_unchanged_shared_chains_and_empty_tables() -> None:
    payload = ("*filter\n:KUBE-FORWARD - [0:0]\n-A KUBE-FORWARD -j ACCEPT\nCOMMIT\n"
               "*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-X - [0:0]\n-A KUBE-SERVICES -d 10.96.0.1 -j KUBE-SVC-X\n"
               "-A KUBE-SVC-X -j DNAT\nCOMMIT\n")
    applied = shared_rules(payload)
    assert applied == {("filter", "KUBE-FORWARD"): ("-A KUBE-FORWARD -j ACCEPT",),
                       ("nat", "KUBE-SERVICES"): ("-A KUBE-SERVICES -d 10.96.0.1 -j KUBE-SVC-X",)}

    text, after, omitted = minimize(payload, applied)
    assert text == "*nat\n:KUBE-SVC-X - [0:0]\n-A KUBE-SVC-X -j DNAT\nCOMMIT\n"
    assert (after, omitted) == (applied, 2)
    # Nothing but unchanged shared chains: nothing to restore at all.
    only_shared = "*filter\n:KUBE-FORWARD - [0:0]\n-A KUBE-FORWARD -j ACCEPT\nCOMMIT\n"
    assert minimize(only_shared, applied)[0] == ""
    # A shared chain that changed (here: emptied) is written whole, declaration included.
    assert minimize("*filter\n:KUBE-FORWARD - [0:0]\nCOMMIT\n", applied)[0] == \
        "*filter\n:KUBE-FORWARD - [0:0]\nCOMMIT\n"


# A random walk over Services and their endpoints: after every sync the delta proxier's kernel must
# equal kube-proxy's (the plain proxier's), whatever happened before.
NAMES = ["alpha", "beta", "gamma", "delta"]
step = st.tuples(st.sampled_from(["add", "delete", "endpoints", "nodeport"]), st.sampled_from(range(len(NAMES))),
                 st.lists(st.integers(2, 9), max_size=3, unique=True))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(step, min_size=1, max_size=3), min_size=1, max_size=6))
async def test_delta_and_kube_proxy_payloads_leave_the_same_kernel(batches: list[list[tuple[str, int, list[int]]]]
                                                                    ) -> None:
    proxiers = [make_proxier([], delta_sync=d) for d in (True, False)]
    for p in proxiers:
        await p.sync_proxy_rules()
    live: dict[str, tuple[Service, EndpointSlice]] = {}
    for batch in batches:
        for action, i, hosts in batch:
            name = NAMES[i]
            old = live.get(name)
            new_svc = (service("default", name, cluster_ip=f"10.96.1.{i + 1}", svc_type="NodePort",
                               ports=[port("http", 80, nodePort=30000 + i)]) if action == "nodeport"
                       else svc(name, f"10.96.1.{i + 1}"))
            new_slice = eps(name, *(f"10.244.2.{h}" for h in hosts))
            for p in proxiers:
                if action == "delete":
                    if old:
                        p.on_service("DELETED", old[0], None)
                        p.on_slice("DELETED", old[1], None)
                elif action == "endpoints" and old:
                    p.on_slice("MODIFIED", old[1], new_slice)
                else:
                    p.on_service("MODIFIED" if old else "ADDED", old[0] if old else None, new_svc)
                    p.on_slice("MODIFIED" if old else "ADDED", old[1] if old else None, new_slice)
            if action == "delete":
                live.pop(name, None)
            elif action == "endpoints" and old:
                live[name] = (old[0], new_slice)
            else:
                live[name] = (new_svc, new_slice)
        for p in proxiers:
            await p.sync_proxy_rules()
        assert await kernel(proxiers[0]) == await kernel(proxiers[1])
