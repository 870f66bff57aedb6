"""Objects that bypassed validation (written straight into etcd) poison nothing else in nftables mode.

test_poisoned_objects.py's case, for kube-proxy's nftables mode: there a Service named "evil\\n"
once made every iptables-restore fail; here the same objects, and some aimed at nft's grammar, must
not make the nftables agent's transaction fail (nft applies a transaction all or nothing, so one bad
line would leave every Service unprogrammed).

A proxy agent (a process of its own, `--proxy-mode nftables`: libnftables in a thread inside a network
namespace of this test) runs against an API server while these sit in etcd, some before it starts
and some written while it runs:

* left out (kube's validation refuses them; the agent counts them in
  kubeproxy_sync_proxy_rules_skipped_objects and logs each once): a Service named "evil\\n"; one named
  `q";flush ruleset;"`; one with a port named "p\\n"; one with the protocol "ICMP"; one with a 2^32 s
  affinity timeout; an EndpointSlice with port 70000;
* left out by the informer: a Service whose port number is the string "80" (it does not decode);
* programmed without their bad parts (addresses are parsed and re-printed, what does not parse is
  dropped, as kube-proxy's sloppy parsers do): an EndpointSlice one of whose addresses is
  `10.244.1.31 } ; flush ruleset ; {`, a LoadBalancer whose source ranges, externalIPs and ingress
  carry nft syntax.

The kernel's `kube-proxy` table must be exactly what a full sync of the valid objects leaves (chains,
rules per chain, set and map elements, read back with `nft -j list`), no transaction may fail, and
nothing of the bad values may reach the table.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from faultkit import REPO, ApiServerProcess, Figures, OwnedEtcd, scratch_netns, wait_for
from nfttable import read_table as kernel
from proxy_agent_process import config
from test_poisoned_objects import RawEtcd, good_service, raw_service, raw_slice, samples

from kubelab.etcd import free_port
from kubelab.models import EndpointSlice, Service
from kubelab.processes import stop_process
from proxyagent.nftables import apply_transaction, render_nft
from proxyagent.nftproxier import nft_config_of

INJECTION = "; flush ruleset ;"
SKIPPED_SERVICES = {"evil\n", 'q";flush ruleset;"', "named-port", "icmp", "sticky-forever"}
UNDECODABLE = {"typed"}
SKIPPED_SLICES = {"big-port"}
ServiceCidrs = tuple[str, ...]


@pytest.fixture
def raw_etcd(own_etcd: OwnedEtcd) -> Iterator[RawEtcd]:
    raw = RawEtcd(own_etcd.url)
    try:
        yield raw
    finally:
        raw.close()


def nft_view(table: Any) -> tuple[dict[str, int], dict[str, set[str]]]:
    return ({name: len(chain.rules) for name, chain in table.chains.items()},
            {name: set(s.elements) for name, s in table.sets.items()})


def expected(api: httpx.Client) -> tuple[dict[str, int], dict[str, set[str]]]:
    """What a full sync of the valid objects leaves: everything the API lists but the invalid ones,
    with the ServiceCIDRs the API serves."""
    services = [Service.from_dict(o) for o in api.get("/api/v1/services").json()["items"]
                if o["metadata"]["name"] not in SKIPPED_SERVICES | UNDECODABLE]
    slices = [EndpointSlice.from_dict(o) for o in api.get("/apis/discovery.k8s.io/v1/endpointslices").json()["items"]
              if o["metadata"]["name"] not in SKIPPED_SLICES]
    cidrs = tuple(c for o in api.get("/apis/networking.k8s.io/v1/servicecidrs").json()["items"]
                  for c in o["spec"]["cidrs"])
    table = apply_transaction(None, render_nft(services, slices, nft_config_of(config("node-1"),
                                                                                service_cidrs=cidrs)).text)
    assert table is not None
    return nft_view(table)


def choking_load_balancer() -> dict[str, Any]:
    lb = raw_service("fenced", "10.96.200.8")
    lb["spec"].update(type="LoadBalancer", loadBalancerSourceRanges=[f"10.240.0.0/24{INJECTION}", "10.250.0.0/16"],
                      externalIPs=["192.0.2.20 }", "192.0.2.21"])
    lb["spec"]["ports"][0]["nodePort"] = 31008
    lb["status"] = {"loadBalancer": {"ingress": [{"ip": f"192.0.2.10{INJECTION}"}, {"ip": "192.0.2.11"}]}}
    return lb


@pytest.mark.root
def test_one_bad_object_in_etcd_leaves_every_other_service_programmed_by_nftables(
        own_etcd: OwnedEtcd, raw_etcd: RawEtcd, apiserver_process: Callable[..., ApiServerProcess], tmp_path: Path,
        figures: Figures) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: creates a network namespace and runs nft in it (CI runs as root)")
    server = apiserver_process(own_etcd.url)
    metrics_port = free_port()
    log_path = tmp_path / "agent.log"
    with httpx.Client(base_url=server.url, timeout=30) as api, scratch_netns("klpn") as netns:
        for i in range(3):
            good_service(api, f"good-{i}", f"10.244.1.{10 + i}")
        # Before the agent starts: in its first list (its first, full, sync).
        raw_etcd.put("/registry/services/default/evil\n", raw_service("evil\n", "10.96.200.1"))
        raw_etcd.put("/registry/endpointslices/default/evil-eps", raw_slice("evil-eps", "evil\n"))
        quoted = 'q";flush ruleset;"'
        raw_etcd.put(f"/registry/services/default/{quoted}", raw_service(quoted, "10.96.200.5"))
        raw_etcd.put("/registry/endpointslices/default/quoted-eps", raw_slice("quoted-eps", quoted))
        typed = raw_service("typed", "10.96.200.4")
        typed["spec"]["ports"][0]["port"] = "80"
        raw_etcd.put("/registry/services/default/typed", typed)
        raw_etcd.put("/registry/services/default/fenced", choking_load_balancer())
        raw_etcd.put("/registry/endpointslices/default/fenced-eps", raw_slice("fenced-eps", "fenced", ip="10.244.1.40"))
        with open(log_path, "wb") as log:
            agent = subprocess.Popen(
                [sys.executable, str(REPO / "tests" / "faults" / "proxy_agent_process.py"), "--server", server.url,
                 "--netns", netns, "--metrics-port", str(metrics_port), "--proxy-mode", "nftables"],
                stdout=log, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)
        try:
            def scraped() -> dict[str, float]:
                try:
                    return samples(httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).text)
                except httpx.HTTPError:
                    return {}

            def kernel_matches() -> bool:
                return kernel(netns) == expected(api)

            wait_for("the valid Services' nftables rules in the kernel", kernel_matches, 90, interval=0.3)
            # While it runs, over its watch: each a partial sync.
            raw_etcd.put("/registry/services/default/named-port",
                         raw_service("named-port", "10.96.200.2", port_name="p\n"))
            icmp = raw_service("icmp", "10.96.200.6")
            icmp["spec"]["ports"][0]["protocol"] = "ICMP"
            raw_etcd.put("/registry/services/default/icmp", icmp)
            forever = raw_service("sticky-forever", "10.96.200.7")
            forever["spec"].update(sessionAffinity="ClientIP",
                                   sessionAffinityConfig={"clientIP": {"timeoutSeconds": 2 ** 32}})
            raw_etcd.put("/registry/services/default/sticky-forever", forever)
            raw_etcd.put("/registry/endpointslices/default/big-port", raw_slice("big-port", "good-1", port=70000))
            choking = raw_slice("choking-eps", "good-2", ip="10.244.1.30")
            choking["endpoints"].append({"addresses": [f"10.244.1.31 }}{INJECTION} {{"],
                                         "conditions": {"ready": True}, "nodeName": "node-1"})
            raw_etcd.put("/registry/endpointslices/default/choking-eps", choking)
            good_service(api, "good-late", "10.244.1.20")
            wait_for("the late Service's rules and the skipped objects counted",
                     lambda: kernel_matches() and scraped().get(
                         'kubeproxy_sync_proxy_rules_skipped_objects{kind="Service"}') == len(SKIPPED_SERVICES)
                     and scraped().get('kubeproxy_sync_proxy_rules_skipped_objects{kind="EndpointSlice"}') == 1,
                     90, interval=0.3)
            good_service(api, "good-later", "10.244.1.21")  # one more sync: nothing is logged again
            wait_for("the last Service's rules", kernel_matches, 90, interval=0.3)
            listing = subprocess.run(["ip", "netns", "exec", netns, "nft", "list", "table", "ip", "kube-proxy"],
                                     capture_output=True, text=True, check=True).stdout
            metrics = scraped()
        finally:
            stop_process(agent)
    agent_log = log_path.read_text()
    # The good Services are there, with their endpoints; the choking slice's good address too.
    for name, ip in (("good-0", "10.244.1.10"), ("good-later", "10.244.1.21"), ("good-2", "10.244.1.30"),
                     ("fenced", "10.244.1.40")):
        assert f"default/{name}/tcp/http__{ip}/8080" in listing, name
    assert "10.250.0.0/16" in listing and "192.0.2.11" in listing and "192.0.2.21" in listing  # fenced's good parts
    for bad in ("evil", "flush", "named-port", "sticky-forever", "icmp", "typed", "70000"):
        assert bad not in listing, bad
    for address in ("10.244.1.31", "192.0.2.10", "192.0.2.20", *(f"10.96.200.{i}" for i in (1, 2, 4, 5, 6, 7))):
        assert not re.search(rf"\b{re.escape(address)}\b", listing), address
    assert metrics['kubeproxy_sync_proxy_rules_invalid_objects_total{kind="Service"}'] == len(SKIPPED_SERVICES)
    assert metrics['kubeproxy_sync_proxy_rules_invalid_objects_total{kind="EndpointSlice"}'] == 1
    assert metrics["kubeproxy_sync_proxy_rules_nftables_sync_failures_total"] == 0
    for kind, key in [("Service", "default/evil\n"), ("Service", 'default/q";flush ruleset;"'),
                      ("Service", "default/named-port"), ("Service", "default/icmp"),
                      ("Service", "default/sticky-forever"), ("EndpointSlice", "default/big-port")]:
        said = f"leaving {kind} {key!r} out of the proxy rules"
        assert agent_log.count(said) == 1, (said, agent_log[-3000:])
    assert agent_log.count("informer: leaving out 'default/typed', it does not decode") == 1, agent_log[-3000:]
    figures.update(raw_objects_planted=12, skipped_services=len(SKIPPED_SERVICES), skipped_slices=1,
                   undecodable_services=1, nftables_sync_failures=0,
                   full_syncs=metrics["kubeproxy_sync_full_proxy_rules_duration_seconds_count"],
                   syncs=metrics["kubeproxy_sync_proxy_rules_duration_seconds_count"])
