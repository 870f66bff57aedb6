"""A proxy agent SIGKILLed in the middle of its syncs (its iptables-restore child with it) converges
after a restart: the kernel holds exactly the rules the API's objects render to, with no stale chain
left from before and no jump rule doubled by the restarts.

The agent runs as a process of its own (tests/faults/proxy_agent_process.py) applying in a network
namespace made here, while Services and EndpointSlices churn through the API. It is killed the moment
an iptables-restore of its own is seen running, several times, and started again each time.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from faultkit import (
    REPO,
    ApiServerProcess,
    Figures,
    OwnedEtcd,
    expected_kube_rules,
    iptables_save,
    kube_rules,
    rules_difference,
    scratch_netns,
    wait_for,
)
from proxy_agent_process import config

from kubelab.models import EndpointSlice, Service
from proxyagent import render
from proxyagent.render import JUMP_RULES

pytestmark = pytest.mark.root

KILLS = 6
SERVICES = 24
EPS = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
SVC = "/api/v1/namespaces/default/services"


@pytest.fixture
def netns() -> Iterator[str]:
    if os.geteuid() != 0:
        pytest.skip("needs root: creates a network namespace and runs iptables in it (CI runs as root)")
    with scratch_netns() as name:
        yield name


class Agents:
    """Proxy agent processes, each in a session of its own so that SIGKILL takes its children too."""

    def __init__(self, server: str, netns: str, log_dir: Path) -> None:
        self.server, self.netns, self.log_dir = server, netns, log_dir
        self.current: subprocess.Popen[bytes] | None = None
        self.started = 0

    def start(self) -> None:
        self.started += 1
        with open(self.log_dir / f"agent-{self.started}.log", "wb") as log:
            self.current = subprocess.Popen(
                [sys.executable, str(REPO / "tests" / "faults" / "proxy_agent_process.py"), "--server", self.server,
                 "--netns", self.netns], stdout=log, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)

    def restoring(self) -> bool:
        """Whether an iptables-restore of the current agent is running right now."""
        assert self.current is not None
        group = self.current.pid
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit() or int(entry.name) == group:
                continue
            try:
                fields = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[2]) == group and b"restore" in Path(f"/proc/{entry.name}/cmdline").read_bytes():
                    return True
            except (OSError, IndexError, ValueError):
                continue
        return False

    def kill(self) -> None:
        """SIGKILL to the agent's whole process group: the agent and any iptables it was running."""
        if self.current is not None:
            try:
                os.killpg(self.current.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.current.wait()

    def stop(self) -> None:
        self.kill()
        self.current = None


def service(i: int, generation: int) -> tuple[dict[str, Any], dict[str, Any]]:
    name = f"svc-{i}-g{generation}"
    spec: dict[str, Any] = {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}
    if i % 3 == 0:
        spec["type"] = "NodePort"
    return ({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec},
            endpoint_slice(name, random.Random(name).randint(0, 3)))


def endpoint_slice(service_name: str, count: int, salt: int = 0) -> dict[str, Any]:
    rng = random.Random(f"{service_name}-{salt}")
    endpoints = [{"addresses": [f"10.244.{rng.randint(1, 2)}.{rng.randint(2, 250)}"],
                  "nodeName": rng.choice(["node-1", "node-2"]), "conditions": {"ready": rng.random() > 0.2}}
                 for _ in range(count)]
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"{service_name}-eps", "labels": {"kubernetes.io/service-name": service_name}},
            "addressType": "IPv4", "endpoints": endpoints,
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}


def churn(api: httpx.Client, stop: threading.Event, done: Counter[str]) -> None:
    """Endpoints come and go, Services are replaced by new ones (new chains, old ones to delete)."""
    rng = random.Random(7)
    generation = {i: 0 for i in range(SERVICES)}
    while not stop.is_set():
        i = rng.randrange(SERVICES)
        name = f"svc-{i}-g{generation[i]}"
        if rng.random() < 0.3:
            api.delete(f"{SVC}/{name}").raise_for_status()
            api.delete(f"{EPS}/{name}-eps").raise_for_status()
            generation[i] += 1
            svc, eps = service(i, generation[i])
            api.post(SVC, json=svc).raise_for_status()
            api.post(EPS, json=eps).raise_for_status()
            done["services replaced"] += 1
        else:
            current = api.get(f"{EPS}/{name}-eps").json()
            fresh = endpoint_slice(name, rng.randint(0, 4), salt=rng.randrange(1000))
            fresh["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            api.put(f"{EPS}/{name}-eps", json=fresh).raise_for_status()
            done["endpoint slices changed"] += 1


def expected_rules(api: httpx.Client) -> dict[tuple[str, str], list[str]]:
    services = [Service.from_dict(o) for o in api.get("/api/v1/services").json()["items"]]
    slices = [EndpointSlice.from_dict(o) for o in api.get("/apis/discovery.k8s.io/v1/endpointslices").json()["items"]]
    return expected_kube_rules(render(services, slices, config("node-1")).text)


def doubled_jumps(save_output: str) -> list[str]:
    counts: Counter[tuple[str, str, str]] = Counter()
    table = ""
    for line in save_output.splitlines():
        if line.startswith("*"):
            table = line[1:]
        elif line.startswith("-A ") and " -j KUBE-" in line and not line.split()[1].startswith("KUBE-"):
            counts[(table, line.split()[1], line.rsplit(" -j ", 1)[1].strip())] += 1
    wanted = {(r.table, r.src_chain, r.dst_chain) for r in JUMP_RULES}
    return [f"{key}: {counts[key]} times" for key in sorted(wanted) if counts[key] != 1]


def test_killed_mid_sync_converges_without_stale_chains(
        netns: str, own_etcd: OwnedEtcd, apiserver_process: Callable[..., ApiServerProcess], tmp_path: Path,
        figures: Figures) -> None:
    server = apiserver_process(own_etcd.url)
    agents = Agents(server.url, netns, tmp_path)
    done: Counter[str] = Counter()
    stop = threading.Event()
    with httpx.Client(base_url=server.url, timeout=30) as api:
        for i in range(SERVICES):
            svc, eps = service(i, 0)
            api.post(SVC, json=svc).raise_for_status()
            api.post(EPS, json=eps).raise_for_status()
        worker = threading.Thread(target=churn, args=(api, stop, done), daemon=True)
        mid_restore = 0
        try:
            agents.start()
            wait_for("the first sync", lambda: "KUBE-SERVICES" in iptables_save(netns), 60)
            worker.start()
            for _ in range(KILLS):
                time.sleep(random.uniform(0.2, 1.0))  # let it get into its stride
                try:
                    wait_for("an iptables-restore of the agent", agents.restoring, 10, interval=0.002)
                    mid_restore += 1
                except AssertionError:
                    pass  # killed between restores, which is a fine fault too
                agents.kill()
                agents.start()
            time.sleep(1)
        finally:
            stop.set()
            worker.join(30)
        try:
            assert not worker.is_alive()
            settled = time.monotonic()
            want = expected_rules(api)
            wait_for("the node's rules to match the API", lambda: not rules_difference(
                kube_rules(iptables_save(netns)), want), 60, interval=0.2)
            converged = time.monotonic() - settled
            saved = iptables_save(netns)
        finally:
            agents.stop()
    assert not rules_difference(kube_rules(saved), want)
    assert not doubled_jumps(saved), doubled_jumps(saved)
    assert done["services replaced"] > 0 and mid_restore > 0, (done, mid_restore)
    figures.update(kills=KILLS, kills_during_iptables_restore=mid_restore, agent_starts=agents.started,
                   services_replaced=done["services replaced"], slices_changed=done["endpoint slices changed"],
                   seconds_to_converge_after_last_restart=round(converged, 2), stale_chains=0,
                   kube_chains_compared=len(want))
