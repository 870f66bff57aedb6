"""Scheduler failover: the leading `kubelab scheduler` is killed (SIGKILL), how long until a pod is bound
by the replica that takes over (kube's timings: leaseDuration 15 s, renewDeadline 10 s, retryPeriod 2 s).

    .venv/bin/python bench/leader_failover.py --kills 20

A private etcd, `kubelab apiserver` and two `kubelab scheduler` replicas, each its own process, and two
Ready nodes registered through the API. Each round: the leader is found (the Lease's holder, matched to
a replica's log), left to run with its standby for --settle seconds (plus up to 2 s at random), killed, a probe pod is created at once, and the time from the kill to the probe's
binding is recorded; a fresh replica is then started in the killed one's place. Expected: about
leaseDuration after the standby last saw the record change (up to retryPeriod x 2.2 before the kill,
its jittered poll), plus up to one more poll, plus the new scheduler's start (its informers' lists). Everything started
here is stopped here.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import signal
import time

import httpx
from harness import Lab, machine, summary_ms

LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler"


def identity(lab: Lab, name: str) -> str:
    found = re.search(rb"acquire leader lease \S+ as (\S+)\.\.\.", (lab.base / f"{name}.log").read_bytes())
    return found.group(1).decode() if found else ""


def holder(api: httpx.Client) -> str:
    answer = api.get(LEASE)
    return str(((answer.json() if answer.status_code == 200 else {}).get("spec") or {}).get("holderIdentity") or "")


def node_of(api: httpx.Client, pod: str) -> str:
    return str((api.get(f"/api/v1/namespaces/bench/pods/{pod}").json().get("spec") or {}).get("nodeName") or "")


def wait(what: str, check: object, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.02)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--settle", type=float, default=20.0, help="seconds both replicas run before each kill")
    args = parser.parse_args()
    lab = Lab()
    try:
        lab.start_etcd()
        server = lab.start_apiserver()
        api = httpx.Client(base_url=server, timeout=30)
        api.post("/api/v1/namespaces", json={"metadata": {"name": "bench"}}).raise_for_status()
        for i in range(2):
            api.post("/api/v1/nodes", json={"metadata": {"name": f"node-{i}"}, "status": {
                "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "500"},
                "conditions": [{"type": "Ready", "status": "True"}]}}).raise_for_status()
        replicas = [f"scheduler-{i}" for i in range(2)]
        for name in replicas:
            lab.spawn(name, "scheduler", "--server", server, "--metrics-bind-address", "")
        spawned = 2
        takeovers: list[float] = []
        for kill in range(args.kills):
            wait("a leader", lambda: holder(api) and all(identity(lab, r) for r in replicas))
            # The kill comes once the standby has watched the Lease for a while, at a moment unrelated to the
            # renewals: a standby that has only just started must wait a whole leaseDuration from its first
            # look (client-go's rule), which measures its start, not a failover.
            time.sleep(args.settle + random.random() * 2)
            leader = next(r for r in replicas if identity(lab, r) == holder(api))
            lab.procs[leader].send_signal(signal.SIGKILL)
            lab.procs[leader].wait()
            killed = time.monotonic()
            probe = f"probe-{kill}"
            api.post("/api/v1/namespaces/bench/pods", json={"metadata": {"name": probe}, "spec": {
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}).raise_for_status()
            wait("the probe's binding", lambda name=probe: node_of(api, name))
            takeovers.append(time.monotonic() - killed)
            print(f"kill {kill + 1}: first binding {takeovers[-1]:.2f}s after the kill", flush=True)
            replicas.remove(leader)
            name = f"scheduler-{spawned}"
            spawned += 1
            lab.spawn(name, "scheduler", "--server", server, "--metrics-bind-address", "")
            replicas.append(name)
        print(json.dumps({"bench": "leader_failover", "kills": args.kills,
                          "kill_to_first_binding": summary_ms(takeovers), "machine": machine()}))
    finally:
        lab.stop()


if __name__ == "__main__":
    main()
