"""Benchmark of the proxy agent, three backends side by side: iptables-nft, iptables-legacy and nftables
mode (`--proxy-mode nftables`), at 1k, 5k and 10k Services x 3 endpoints.

Run as root (it creates network namespaces, named klbench-*, and always deletes them):

    .venv/bin/python bench/proxy_sync.py                          # all sizes, all three backends
    .venv/bin/python bench/proxy_sync.py --sizes 1000 --repeat 3 --backends nftables

Each (size, backend) runs in a fresh Python process of its own (this script with --worker), so
that its memory figure is its own and one backend's garbage does not slow the next. In it:

* full sync, `--full-repeat` times, each into an empty namespace: the agent's Proxier (NftProxier
  in nftables mode), fed the objects as informer events, runs its first sync: render + apply, as a
  starting agent does (iptables: `ip netns exec NS <backend>-restore -w 5 -W 100000 --noflush
  --counters`, with its iptables-save and jump checks; nftables: `nft -j list` of the chains and
  sets, then the transaction through libnftables in a thread inside the namespace). The baseline,
  in the same run, alternating who goes first: a plain `<backend>-restore --noflush --counters`
  (or `nft -f -`) of the same payload into another empty namespace;
* agent memory: the process's RSS after the first full sync minus before the Proxier was made
  (the objects themselves excluded), and the process's peak RSS;
* render (CLI): what `kubelab proxy render` runs for these objects (`render()` or, in nftables
  mode, `render_nft(first_sync=True)`), `--repeat` times;
* one-Service change, `--repeat` times: the agent holds every rule in its namespace; one Service's
  EndpointSlice changes (one endpoint replaced) and the agent runs its partial sync. Reported: the
  sync's total, its render, its apply, and the agent's CPU for it (this process's user + system
  time, threads included, plus its children's: iptables-restore and `ip netns exec`; the
  kernel's commit is in one of the two). The baseline: iptables backends restore the same
  partial payload again with a plain restore; nftables mode's transactions are not idempotent
  (element deletes), so a twin namespace that got the full transaction with `nft -f` gets each
  partial transaction with `nft -f` too. In the iptables modes the same agent then turns on
  --delta-sync (after one sync that records the shared chains) and the change is measured again.

`--fill-only` (iptables backends) measures only the change, filling the namespace the fast way
(see FillingApplier). `--skip-full` leaves out the repeated full syncs and their baselines (iptables-nft at 10k takes a
minute per restore) and keeps one agent full sync (it is needed for the change). Nothing here is
asserted beyond each sync succeeding; the numbers go to BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import os
import platform
import resource
import secrets
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubelab.models import EndpointSlice, Service
from proxyagent import Proxier, ProxyConfig, render
from proxyagent.apply import IptablesApplier
from proxyagent.nftables import render_nft
from proxyagent.nftables.libnft import LibNftApplier, nft_applier
from proxyagent.nftproxier import NftProxier, nft_config_of

CONFIG = ProxyConfig(node_name="node-1", node_ips=("10.240.0.11",), cluster_cidr="10.244.0.0/16")
NFT_CONFIG = nft_config_of(CONFIG)
# Measured in this order: iptables-nft's full restore at 10k, by far the longest, comes last.
BACKENDS = ("nftables", "iptables-legacy", "iptables-nft")


def make_objects(count: int) -> tuple[list[Service], list[EndpointSlice]]:
    """`count` ClusterIP Services (one named port) with 3 ready endpoints each, spread over 3 nodes."""
    services, slices = [], []
    for i in range(count):
        name = f"svc-{i}"
        services.append(Service.from_dict({
            "apiVersion": "v1", "kind": "Service", "metadata": {"namespace": "bench", "name": name},
            "spec": {"type": "ClusterIP", "clusterIP": f"10.{96 + i // 65536}.{i // 256 % 256}.{i % 256}",
                     "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]}}))
        slices.append(endpoint_slice(name, [endpoint_ip(3 * i + k) for k in range(3)]))
    return services, slices


def endpoint_ip(n: int) -> str:
    return f"10.{244 + n // 62500}.{n // 250 % 250}.{n % 250 + 2}"


def endpoint_slice(service: str, ips: list[str]) -> EndpointSlice:
    return EndpointSlice.from_dict({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"namespace": "bench", "name": f"{service}-x", "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4", "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": [{"addresses": [ip], "nodeName": f"node-{k + 1}", "conditions": {"ready": True}}
                      for k, ip in enumerate(ips)]})


@contextmanager
def namespace(tag: str) -> Iterator[str]:
    name = f"klbench-{secrets.token_hex(3)}-{tag}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def plain_apply(ns: str, backend: str, payload: bytes) -> float:
    """The baseline: a plain `<backend>-restore --noflush --counters`, or `nft -f -` (wall time, seconds)."""
    argv = ["nft", "-f", "-"] if backend == "nftables" else [f"{backend}-restore", "--noflush", "--counters"]
    start = time.perf_counter()
    done = subprocess.run(["ip", "netns", "exec", ns, *argv], input=payload, check=False,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{argv[0]} failed in {ns}: {done.stderr.decode(errors='replace')[:2000]}")
    return elapsed


def cpu_now() -> float:
    """This process's CPU (every thread) plus its reaped children's, user + system, seconds."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def rss_mib() -> tuple[float, float]:
    """(VmRSS, VmHWM) of this process, MiB."""
    values = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) / 1024
    return values["VmRSS"], values["VmHWM"]


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def summary(samples: list[float]) -> dict[str, float]:
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples), "n": len(samples)}


class FillingApplier(IptablesApplier):
    """--fill-only: the first restore (the agent's full sync) loads the payload without --noflush, then
    adds the jumps; as the namespace is empty, the kernel ends up with the same rules, in seconds rather
    than the many minutes iptables-nft's --noflush restore of 10k Services takes on a loaded machine.
    Every later restore is the agent's own."""

    filled = False

    async def restore(self, payload: str) -> None:
        if self.filled:
            await super().restore(payload)
            return
        self.restores += 1
        code, _, err = await self._run(self.command("-restore", "-w", "5", "--counters"), payload.encode())
        if code != 0:
            raise SystemExit(f"{self.backend}-restore (fill) failed: {err[:2000]}")
        await self.ensure_jumps()
        self.filled = True


class Agent:
    """One backend's agent in a namespace: the Proxier kube-proxy would run, fed the objects."""

    def __init__(self, backend: str, ns: str, services: list[Service], slices: list[EndpointSlice], *,
                 fill: bool = False) -> None:
        self.backend = backend
        self.lib: LibNftApplier | None = None
        self.proxier: Proxier
        if backend == "nftables":
            applier = nft_applier(ns)  # what `kubelab node --proxy-mode nftables` picks
            if not isinstance(applier, LibNftApplier):
                raise SystemExit("libnftables did not load: the nftables agent would use nft -f")
            self.lib = applier
            self.proxier = NftProxier(CONFIG, applier, min_sync_period=0.0)
        else:
            applier = (FillingApplier if fill else IptablesApplier)(ns, backend=backend)
            self.proxier = Proxier(CONFIG, applier, min_sync_period=0.0)
        for svc in services:
            self.proxier.on_service("ADDED", None, svc)
        for es in slices:
            self.proxier.on_slice("ADDED", None, es)
        self.proxier.on_services_synced()
        self.proxier.on_slices_synced()

    async def sync(self) -> dict[str, float]:
        """One sync; its timings (render, apply, total) and the CPU it cost."""
        syncs = self.proxier.syncs
        cpu = cpu_now()
        await self.proxier.sync_proxy_rules()
        spent = cpu_now() - cpu
        if self.proxier.syncs != syncs + 1:
            raise SystemExit(f"{self.backend}: the sync failed (see the log)")
        t = self.proxier.last_timings
        apply = t["transact"] if "transact" in t else t["restore"]
        return {"render": t["render"] + t.get("delta", 0.0), "apply": apply, "total": t["total"], "cpu": spent,
                "lines": float(self.proxier.last_payload.count("\n"))}

    def close(self) -> None:
        if self.lib is not None:
            self.lib.close()


def render_cli(backend: str, services: list[Service], slices: list[EndpointSlice]) -> str:
    if backend == "nftables":
        return render_nft(services, slices, NFT_CONFIG, first_sync=True).text
    return render(services, slices, CONFIG).text


async def bench_backend(count: int, backend: str, *, repeat: int, full_repeat: int,
                        fill: bool = False) -> dict[str, Any]:
    tag = backend.rsplit("-", 1)[-1][:6]
    services, slices = make_objects(count)
    result: dict[str, Any] = {"services": count, "backend": backend}
    with ExitStack() as keep:
        # The first round's namespaces stay: the agent's for the changes, the baseline's as nftables' twin.
        agent_ns, twin_ns = keep.enter_context(namespace(tag)), keep.enter_context(namespace(tag))
        rss_before, _ = rss_mib()
        fill = fill and backend != "nftables"
        agent = Agent(backend, agent_ns, services, slices, fill=fill)
        keep.callback(agent.close)
        first = await agent.sync()
        rss_after, hwm = rss_mib()
        result["memory_mib"] = {"agent": rss_after - rss_before, "process_peak": hwm}
        payload = agent.proxier.last_payload.encode()
        result["payload_lines"] = payload.count(b"\n")
        # After the memory reading: the renders' garbage would otherwise be the agent's free lists.
        result["render_cli"] = summary([timed(lambda: render_cli(backend, services, slices))
                                        for _ in range(repeat)])
        if fill:  # no full sync to report: only the change is measured
            result["render_cli"] = summary([timed(lambda: render_cli(backend, services, slices))])
            result["one_service_change"] = await bench_changes(agent, slices, None, repeat)
            agent.proxier.delta_sync = True
            result["one_service_change_delta"] = await bench_changes(agent, slices, None, repeat, warm=1)
            return result
        fulls, base = [first], [plain_apply(twin_ns, backend, payload)]
        print(f"  {count} {backend}: full sync {first['total']:.3f}s (apply {first['apply']:.3f}s), "
              f"plain {base[0]:.3f}s", file=sys.stderr, flush=True)
        for i in range(1, full_repeat):
            # Alternate who goes first, so drift on a shared machine hits both alike.
            for which in ((0, 1) if i % 2 == 0 else (1, 0)):
                with namespace(tag) as ns:
                    if which == 0:
                        other = Agent(backend, ns, services, slices)
                        try:
                            fulls.append(await other.sync())
                        finally:
                            other.close()
                        del other
                    else:
                        base.append(plain_apply(ns, backend, payload))
        result["full_sync"] = {k: summary([f[k] for f in fulls]) for k in ("render", "apply", "total", "cpu")}
        result["full_baseline"] = summary(base)
        result["one_service_change"] = await bench_changes(agent, slices, twin_ns, repeat)
        if backend != "nftables":
            agent.proxier.delta_sync = True
            result["one_service_change_delta"] = await bench_changes(agent, slices, None, repeat, warm=1)
        else:
            # What closing the applier still gives back (its thread; libnftables' context, with its cache
            # of the table, is freed and the heap trimmed after every transaction since fix-small).
            before_close, _ = rss_mib()
            agent.close()
            ctypes.CDLL(None).malloc_trim(0)
            result["memory_mib"]["libnftables_context"] = before_close - rss_mib()[0]
    return result


async def bench_changes(agent: Agent, slices: list[EndpointSlice], twin: str | None, repeat: int, *,
                        warm: int = 0) -> dict[str, Any]:
    """`repeat` partial syncs, each of one Service's endpoints (one replaced), and their baselines."""
    target = len(slices) // 2
    name = f"svc-{target}"
    samples: list[dict[str, float]] = []
    base: list[float] = []
    for n in range(warm + repeat):
        serial = agent.proxier.syncs
        old = slices[target]
        others = [(e.addresses or ["?"])[0] for e in (old.endpoints or [])[1:]]
        new = endpoint_slice(name, [f"10.250.{serial // 250 % 250}.{serial % 250 + 2}", *others])
        agent.proxier.on_slice("MODIFIED", old, new)
        slices[target] = new
        sample = await agent.sync()
        payload = agent.proxier.last_payload.encode()
        if agent.backend == "nftables":
            assert twin is not None
            plain = plain_apply(twin, "nftables", payload)
        else:
            plain = plain_apply_same(agent, payload)
        if n >= warm:
            samples.append(sample)
            base.append(plain)
    out: dict[str, Any] = {k: summary([s[k] for s in samples]) for k in ("render", "apply", "total", "cpu")}
    out["payload_lines"] = int(statistics.median(s["lines"] for s in samples))
    out["baseline_apply"] = summary(base)
    return out


def plain_apply_same(agent: Agent, payload: bytes) -> float:
    applier = agent.proxier.applier
    assert isinstance(applier, IptablesApplier) and applier.netns is not None
    return plain_apply(applier.netns, agent.backend, payload)


def worker(count: int, backend: str, repeat: int, full_repeat: int, fill: bool) -> int:
    result = asyncio.run(bench_backend(count, backend, repeat=repeat, full_repeat=full_repeat, fill=fill))
    print(json.dumps(result))
    return 0


def fmt(s: dict[str, float], scale: float = 1000) -> str:
    return f"{s['median'] * scale:,.0f} ms ({s['min'] * scale:,.0f}-{s['max'] * scale:,.0f})"


def fmt_ms1(s: dict[str, float]) -> str:
    """Milliseconds with a decimal below 100 ms (the nftables change)."""
    med, lo, hi = (s[k] * 1000 for k in ("median", "min", "max"))
    if med >= 100:
        return fmt(s)
    return f"{med:,.1f} ms ({lo:,.1f}-{hi:,.1f})"


def report(results: list[dict[str, Any]]) -> str:
    by = {(r["services"], r["backend"]): r for r in results}
    lines = [("| Services | backend | payload lines | render (CLI) | agent full sync: render | apply | total "
             "| plain apply of the same payload | apply ratio | agent CPU | agent memory |"),
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        if "full_sync" not in r:  # --fill-only
            continue
        f = r["full_sync"]
        ratio = f["apply"]["median"] / r["full_baseline"]["median"]
        lines.append(f"| {r['services']:,} | {r['backend']} | {r['payload_lines']:,} | {fmt(r['render_cli'])} | "
                     f"{fmt(f['render'])} | {fmt(f['apply'])} | {fmt(f['total'])} | {fmt(r['full_baseline'])} | "
                     f"{ratio:.2f} | {f['cpu']['median']:,.2f} s | {r['memory_mib']['agent']:,.0f} MiB |")
    lines += ["", ("| Services | backend | partial payload lines | agent sync total | render | apply "
              "| plain apply of the same payload | agent CPU per change | total vs iptables-nft |"),
              "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        ref = by.get((r["services"], "iptables-nft"))
        for key, label in (("one_service_change", r["backend"]),
                           ("one_service_change_delta", f"{r['backend']}, --delta-sync")):
            p = r.get(key)
            if not p:
                continue
            vs = (f"{p['total']['median'] / ref['one_service_change']['total']['median']:.3f}"
                  if ref else "-")
            lines.append(f"| {r['services']:,} | {label} | {p['payload_lines']:,} | {fmt_ms1(p['total'])} | "
                         f"{fmt_ms1(p['render'])} | {fmt_ms1(p['apply'])} | {fmt_ms1(p['baseline_apply'])} | "
                         f"{fmt_ms1(p['cpu'])} | {vs} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 10000])
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument("--repeat", type=int, default=5, help="renders and one-Service changes per size (default 5)")
    parser.add_argument("--full-repeat", type=int, default=3, help="full syncs per size and backend (default 3)")
    parser.add_argument("--skip-full", action="store_true", help="one full sync only (the change needs it), "
                        "i.e. --full-repeat 1")
    parser.add_argument("--fill-only", action="store_true",
                        help="iptables backends: fill the namespace with a restore without --noflush (then the "
                             "jumps) instead of measuring full syncs; only the one-Service change is measured")
    parser.add_argument("--json", type=Path, help="also write the raw numbers here")
    parser.add_argument("--report", type=Path, metavar="JSON", help="only print the tables of an earlier --json")
    parser.add_argument("--worker", nargs=2, metavar=("SIZE", "BACKEND"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    full_repeat = 1 if args.skip_full else args.full_repeat
    if args.report:
        print(report(json.loads(args.report.read_text())["results"]))
        return 0
    if os.geteuid() != 0:
        print("bench/proxy_sync.py needs root (network namespaces, iptables, nft)", file=sys.stderr)
        return 1
    if args.worker:
        return worker(int(args.worker[0]), args.worker[1], args.repeat, full_repeat, args.fill_only)
    versions = [subprocess.run([tool, "--version"], capture_output=True, text=True, check=False).stdout.strip()
                for tool in ("iptables", "nft")]
    print(f"# proxy_sync on {platform.node()}: {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"{', '.join(versions)}, kernel {platform.release()}", flush=True)
    out: dict[str, Any] = {"loadavg_before": [round(x, 2) for x in os.getloadavg()], "results": []}
    for count in args.sizes:
        for backend in args.backends:
            load = os.getloadavg()[0]
            print(f"{count} Services x 3 endpoints, {backend} (load {load:.2f}) ...", flush=True)
            done = subprocess.run([sys.executable, __file__, "--worker", str(count), backend, "--repeat",
                                   str(args.repeat), "--full-repeat", str(full_repeat),
                                   *(["--fill-only"] if args.fill_only else [])],
                                  stdout=subprocess.PIPE, text=True, check=False)
            if done.returncode != 0:
                print(f"  {backend} at {count} failed (exit {done.returncode})", flush=True)
                continue
            out["results"].append(json.loads(done.stdout.strip().splitlines()[-1]))
            if args.json:  # after each, so a long run that is stopped keeps what it measured
                args.json.write_text(json.dumps(out, indent=2))
    out["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    print(f"load average before {out['loadavg_before']}, after {out['loadavg_after']}")
    print(report(out["results"]))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
