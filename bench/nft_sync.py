"""Benchmark of kube-proxy's nftables mode as kubelab renders it: render and `nft -f` at 1k, 5k and 10k
Services x 3 endpoints, and a one-Service endpoint change at the largest size.

Run as root (it creates network namespaces named klnftb-*, and always deletes them):

    .venv/bin/python bench/nft_sync.py                       # 1000, 5000, 10000; 3 repeats
    .venv/bin/python bench/nft_sync.py --sizes 1000 --repeat 1

For every size, each `--repeat` times (median and min-max reported):

* render: `render_nft` of the objects, a first full sync as `kubelab proxy render --proxy-mode nftables`;
* full apply: that transaction with `ip netns exec NS nft -f -` into an empty namespace;
* one-Service change (largest size): the namespace holds the full table; one Service's endpoints
  change; a partial sync is rendered from kube-proxy's model (service ports and endpoints already
  built, as an agent keeps them from informer events: only the changed slice is converted) with
  only that Service's chains and the changed elements, and applied with one `nft -f`; reported as
  render, apply and their sum, with the transaction's size.

Nothing here is asserted; the numbers go to BENCHMARKS.md (issue M, beside bench/proxy_sync.py's
iptables backends).
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubelab.models import EndpointSlice, Service
from proxyagent.nftables import NftConfig, render_nft
from proxyagent.nftables.render import render_nft_ports
from proxyagent.serviceports import build_endpoints_map, build_service_ports

CONFIG = NftConfig(node_name="node-1", node_ips=("10.240.0.11",), cluster_cidr="10.244.0.0/16",
                   nodeport_addresses=("primary",), service_cidrs=("10.96.0.0/12",))


def objects(n: int, *, changed: int | None = None) -> tuple[list[Service], list[EndpointSlice]]:
    services, slices = [], []
    for i in range(n):
        name = f"svc-{i}"
        services.append(Service.model_validate({
            "apiVersion": "v1", "kind": "Service", "metadata": {"namespace": "bench", "name": name},
            "spec": {"type": "ClusterIP", "clusterIP": f"10.{96 + i // 65536}.{i // 256 % 256}.{i % 256}",
                     "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}}))
        last = 9 if i == changed else 3
        slices.append(EndpointSlice.model_validate({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"namespace": "bench", "name": f"{name}-x", "labels": {"kubernetes.io/service-name": name}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [f"10.244.{i // 250 % 250}.{(i % 250) + k}"]} for k in (1, 2, last)],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}))
    return services, slices


def nft_apply(ns: str, text: str) -> float:
    start = time.perf_counter()
    done = subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=text, capture_output=True, text=True,
                          check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"nft -f failed: {done.stderr[:2000]}")
    return elapsed


def netns() -> str:
    name = f"klnftb-{secrets.token_hex(4)}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    return name


def summary(values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return f"{statistics.median(ms):8.1f} ms ({min(ms):.1f}-{max(ms):.1f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 10000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    made: list[str] = []
    try:
        for n in args.sizes:
            services, slices = objects(n)
            renders, applies = [], []
            ruleset = None
            for _ in range(args.repeat):
                start = time.perf_counter()
                ruleset = render_nft(services, slices, CONFIG, first_sync=True)
                renders.append(time.perf_counter() - start)
                made.append(ns := netns())
                applies.append(nft_apply(ns, ruleset.text))
                subprocess.run(["ip", "netns", "del", made.pop()], check=False)
            assert ruleset is not None
            print(f"{n:6d} Services x 3: render {summary(renders)}  full nft -f {summary(applies)}  "
                  f"({ruleset.operations} operations, {len(ruleset.text) // 1024} KiB)")
        n = max(args.sizes)
        services, slices = objects(n)
        made.append(ns := netns())
        full = render_nft(services, slices, CONFIG, first_sync=True)
        nft_apply(ns, full.text)
        svc_ports = build_service_ports(services)
        endpoints = build_endpoints_map(slices, node_name=CONFIG.node_name)
        chains = frozenset(full.active_chains)
        renders, applies, sizes = [], [], []
        previous = full
        for k in range(args.repeat):
            target = n // 2 + k
            _, new_slices = objects(n, changed=target)
            start = time.perf_counter()
            changed_map = {**endpoints, **build_endpoints_map([new_slices[target]], node_name=CONFIG.node_name)}
            partial = render_nft_ports(svc_ports, changed_map, CONFIG, changed={f"bench/svc-{target}"},
                                       previous_elements=previous.elements, existing_chains=chains)
            renders.append(time.perf_counter() - start)
            applies.append(nft_apply(ns, partial.text))
            sizes.append(partial.operations)
            # Undo, so the next repeat changes a table like the first one (not measured).
            previous = render_nft_ports(svc_ports, endpoints, CONFIG, changed={f"bench/svc-{target}"},
                                        previous_elements=partial.elements,
                                        existing_chains=chains | partial.active_chains)
            nft_apply(ns, previous.text)
            chains = chains | partial.active_chains
        total = [r + a for r, a in zip(renders, applies, strict=True)]
        print(f"one-Service change at {n}: render {summary(renders)}  nft -f {summary(applies)}  "
              f"total {summary(total)}  ({statistics.median(sizes):.0f} operations)")
    finally:
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], check=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
