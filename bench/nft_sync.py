"""Benchmark of kube-proxy's nftables mode as kubelab renders and applies it: a full sync and a
one-Service endpoint change at 1k and 10k Services x 3 endpoints, before and after in one run.

Run as root (it creates network namespaces named klnftb-*, and always deletes them):

    .venv/bin/python bench/nft_sync.py                       # 1000 and 10000; 5 repeats
    .venv/bin/python bench/nft_sync.py --sizes 1000 --repeat 3

For every size, two namespaces:

* full sync: `render_nft` of the objects (the first sync, text included), applied with
  `ip netns exec NS nft -f -` into one namespace and with libnftables (LibNftApplier: a thread inside
  the other namespace) into the other;
* one-Service change, `--repeat` times (median and min-max): one Service's endpoints change and the
  partial sync is rendered from kube-proxy's model (service ports and endpoints already built, as an
  agent keeps them) twice: the walk of every port (before: `previous_elements`) and the proportional
  render (after: `previous`, only that Service's ports); the two texts must be equal. The walk's is
  applied with `nft -f` in the first namespace (before), the other with libnftables in the second
  (after) and as an nf_tables netlink batch (LibNftApplier(netlink_batches=True), netlink.py) in a
  third, all three in the same round; each change is then undone the same way (not measured).
  "before", "after" and "netlink" are render + apply, and their ratios are printed. After the
  changes the three namespaces' `nft list table ip kube-proxy` must be equal.

`--sync-only` measures the agent's side alone, without root: NftProxier's whole partial sync (event
bookkeeping, render, stale chains; the transaction handed to an applier that keeps nothing) for
one-Service endpoint changes, each `--code NAME=DIR` (a checkout of kubelab, e.g. `git archive main`)
in its own process, the codes alternated `--passes` times:

    .venv/bin/python bench/nft_sync.py --sync-only --sizes 10000 --repeat 20 \
        --code before=/dev/shm/mr-base --code after=.

Nothing here is asserted beyond the texts' equality; the numbers go to BENCHMARKS.md (issue M).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import statistics
import subprocess
import sys
import time
from pathlib import Path

# --code-dir: the checkout a --sync-only worker imports (before any import of it below).
sys.path.insert(0, sys.argv[sys.argv.index("--code-dir") + 1] if "--code-dir" in sys.argv
                else str(Path(__file__).resolve().parents[1]))

from kubelab.models import EndpointSlice, Service
from proxyagent.nftables import NftConfig, render_nft
from proxyagent.nftables.libnft import LibNftApplier
from proxyagent.nftables.render import NftRuleset, render_nft_ports
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
        slices.append(slice_of(i, changed=i == changed))
    return services, slices


def slice_of(i: int, *, changed: bool = False) -> EndpointSlice:
    """Service i's EndpointSlice: three endpoints, the third moved elsewhere when `changed`."""
    name = f"svc-{i}"
    return EndpointSlice.model_validate({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"namespace": "bench", "name": f"{name}-x", "labels": {"kubernetes.io/service-name": name}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [f"10.244.{i // 250 % 250}.{(i % 250) + k}"]} for k in (1, 2, 9 if changed else 3)],
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]})


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


def lib_apply(applier: LibNftApplier, text: str) -> float:
    start = time.perf_counter()
    asyncio.run(applier.transact(text))
    return time.perf_counter() - start


def change_of(n: int, target: int, state: dict[str, object], *, proportional: bool,
              undo: bool) -> tuple[NftRuleset, float]:
    """The partial sync of Service `target`'s endpoints (changed, or back when `undo`), timed:
    the walk of every port (the baseline) or the proportional render."""
    svc_ports = state["ports"]
    endpoints = state["endpoints"]
    assert isinstance(svc_ports, list) and isinstance(endpoints, dict)
    _, new_slices = objects(n, changed=None if undo else target)
    previous = state["previous"]
    assert isinstance(previous, NftRuleset)
    start = time.perf_counter()
    changed_map = {**endpoints, **build_endpoints_map([new_slices[target]], node_name=CONFIG.node_name)}
    key = f"bench/svc-{target}"
    if proportional:
        # The walk (measured first) read `previous`; this render takes its bookkeeping over.
        ruleset = render_nft_ports(svc_ports, changed_map, CONFIG, changed={key}, previous=previous,
                                   changed_ports=[sp for sp in state["by_service"][key]])  # type: ignore[index]
    else:
        ruleset = render_nft_ports(svc_ports, changed_map, CONFIG, changed={key},
                                   previous_elements=previous.elements, existing_chains=previous.active_chains)
    return ruleset, time.perf_counter() - start


class _NoTable:
    """An applier that applies nothing: what is left of a sync is the agent's own work."""

    async def transact(self, transaction: str) -> None:
        pass

    async def existing(self) -> tuple[frozenset[str], frozenset[str]]:
        return frozenset(), frozenset()

    async def listed(self) -> str:
        return ""

    async def cleanup_leftovers(self) -> None:
        pass


def sync_worker(n: int, repeat: int) -> dict[str, list[float]]:
    """In a --code-dir process: NftProxier's full sync, then `repeat` one-Service endpoint changes
    (each changed and undone, both timed): wall and CPU seconds of each sync_proxy_rules."""
    from proxyagent import ProxyConfig
    from proxyagent.nftproxier import NftProxier

    async def run() -> dict[str, list[float]]:
        services, slices = objects(n)
        proxier = NftProxier(ProxyConfig(node_name=CONFIG.node_name, node_ips=CONFIG.node_ips,
                                         cluster_cidr=CONFIG.cluster_cidr), _NoTable())
        for svc in services:
            proxier.on_service("ADDED", None, svc)
        for eps in slices:
            proxier.on_slice("ADDED", None, eps)
        proxier.on_services_synced()
        proxier.on_slices_synced()
        await proxier.sync_proxy_rules()
        out: dict[str, list[float]] = {"wall": [], "cpu": [], "render": []}
        for k in range(repeat):
            target = n // 2 + k
            moved = slice_of(target, changed=True)
            for old, new in ((slices[target], moved), (moved, slices[target])):
                proxier.on_slice("MODIFIED", old, new)
                wall, cpu = time.perf_counter(), time.thread_time()
                await proxier.sync_proxy_rules()
                out["cpu"].append(time.thread_time() - cpu)
                out["wall"].append(time.perf_counter() - wall)
                out["render"].append(proxier.last_timings.get("render", 0.0))
                assert proxier.syncs == 2 + len(out["wall"]) - 1
        return out

    return asyncio.run(run())


def sync_only(args: argparse.Namespace) -> int:
    codes = [tuple(c.split("=", 1)) for c in args.code] or [("after", ".")]
    for n in args.sizes:
        results: dict[str, dict[str, list[float]]] = {name: {} for name, _ in codes}
        for _ in range(args.passes):
            for name, directory in codes:
                done = subprocess.run([sys.executable, __file__, "--worker", "--code-dir", str(Path(directory).resolve()),
                                       "--sizes", str(n), "--repeat", str(args.repeat)],
                                      capture_output=True, text=True, check=True)
                for key, values in json.loads(done.stdout).items():
                    results[name].setdefault(key, []).extend(values)
        print(f"{n:6d} Services x 3, partial sync of a one-Service endpoint change, no apply, "
              f"median (min-max) of {len(next(iter(results.values()))['wall'])}:")
        for name, _ in codes:
            for key in ("wall", "cpu", "render"):
                print(f"    {name:8s} {key:7s} {summary(results[name][key])}")
        if len(codes) == 2:
            (a, _), (b, _) = codes
            print(f"    {a}/{b} wall ratio {statistics.median(results[a]['wall']) / statistics.median(results[b]['wall']):.1f}x",
                  flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--sync-only", action="store_true", help="NftProxier's partial sync without apply (no root)")
    parser.add_argument("--code", action="append", default=[], metavar="NAME=DIR",
                        help="with --sync-only: a kubelab checkout to measure (repeatable; default after=.)")
    parser.add_argument("--passes", type=int, default=2, help="with --sync-only: rounds over the codes")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--code-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(sync_worker(args.sizes[0], args.repeat)))
        return 0
    if args.sync_only:
        return sync_only(args)
    made: list[str] = []
    appliers: list[LibNftApplier] = []
    try:
        for n in args.sizes:
            services, slices = objects(n)
            start = time.perf_counter()
            full = render_nft(services, slices, CONFIG, first_sync=True)
            render_full = time.perf_counter() - start
            made.append(cli_ns := netns())
            made.append(lib_ns := netns())
            made.append(nl_ns := netns())
            appliers.append(lib := LibNftApplier(lib_ns))
            appliers.append(nl := LibNftApplier(nl_ns, netlink_batches=True))
            cli_full = nft_apply(cli_ns, full.text)
            lib_full = lib_apply(lib, full.text)
            lib_apply(nl, full.text)  # a full sync goes through the library whatever the option
            print(f"{n:6d} Services x 3, full sync: render {render_full * 1000:.0f} ms, nft -f {cli_full * 1000:.0f} ms, "
                  f"libnftables {lib_full * 1000:.0f} ms ({full.operations} operations, {len(full.text) // 1024} KiB)",
                  flush=True)
            svc_ports = build_service_ports(services)
            by_service: dict[str, list[object]] = {}
            for sp in svc_ports:
                by_service.setdefault(sp.service_key, []).append(sp)
            endpoints = build_endpoints_map(slices, node_name=CONFIG.node_name)
            state: dict[str, object] = {"ports": svc_ports, "endpoints": endpoints, "by_service": by_service,
                                        "previous": full}
            timings: dict[str, list[float]] = {k: [] for k in ("walk", "proportional", "nft -f", "libnftables",
                                                                "netlink", "libnftables CPU", "netlink CPU")}
            ops = []
            for k in range(args.repeat):
                target = n // 2 + k
                for undo in (False, True):
                    walk, t_walk = change_of(n, target, state, proportional=False, undo=undo)
                    fast, t_fast = change_of(n, target, state, proportional=True, undo=undo)
                    assert fast.text == walk.text, "the proportional render must write the walk's transaction"
                    t_cli = nft_apply(cli_ns, walk.text)
                    t_lib = lib_apply(lib, fast.text)
                    cpu_lib = lib.last_cpu_seconds
                    batches = nl.netlink_transactions
                    t_nl = lib_apply(nl, fast.text)
                    assert nl.netlink_transactions == batches + 1, "the partial sync must go as a netlink batch"
                    if not undo:  # the change measured; the undo (same size) only resets the table
                        timings["walk"].append(t_walk)
                        timings["proportional"].append(t_fast)
                        timings["nft -f"].append(t_cli)
                        timings["libnftables"].append(t_lib)
                        timings["netlink"].append(t_nl)
                        # The worker thread's CPU (user + system: nft's cache reload, the kernel's
                        # commit): what the wall clock would be on an idle core.
                        timings["libnftables CPU"].append(cpu_lib)
                        timings["netlink CPU"].append(nl.last_cpu_seconds)
                        ops.append(fast.operations)
                    state["previous"] = fast
            before = [w + c for w, c in zip(timings["walk"], timings["nft -f"], strict=True)]
            after = [f + lib_t for f, lib_t in zip(timings["proportional"], timings["libnftables"], strict=True)]
            batch = [f + t for f, t in zip(timings["proportional"], timings["netlink"], strict=True)]
            print(f"{n:6d} Services, one-Service endpoint change ({statistics.median(ops):.0f} operations), "
                  f"median (min-max) of {args.repeat}:")
            for name, values in timings.items():
                print(f"    {name:16s} {summary(values)}")
            print(f"    before (walk + nft -f)           {summary(before)}")
            print(f"    after (proportional + libnftables) {summary(after)}  "
                  f"ratio {statistics.median(before) / statistics.median(after):.1f}x", flush=True)
            print(f"    netlink (proportional + batch)   {summary(batch)}  "
                  f"ratio {statistics.median(before) / statistics.median(batch):.1f}x "
                  f"({statistics.median(after) / statistics.median(batch):.1f}x libnftables)", flush=True)
            listings = {ns: subprocess.run(["ip", "netns", "exec", ns, "nft", "list", "table", "ip", "kube-proxy"],
                                           capture_output=True, text=True, check=True).stdout
                        for ns in (cli_ns, lib_ns, nl_ns)}
            assert len(set(listings.values())) == 1, "the three namespaces must hold the same table"
            for applier in appliers:
                applier.close()
            appliers.clear()
            for ns in made:
                subprocess.run(["ip", "netns", "del", ns], check=False)
            made.clear()
    finally:
        for applier in appliers:
            applier.close()
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], check=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
