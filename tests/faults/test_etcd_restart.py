"""etcd restarted under a running cluster: `kubelab up --dataplane netns --etcd-servers URL` against an
etcd this test owns, while pods come and go, change labels and Services are made and removed. etcd is
killed (SIGKILL) and started again on the same data dir and ports, then stopped politely (SIGTERM)
and started again. Every component lives through it on its informers (watch ERROR 503, back off,
watch again from its resourceVersion) and misses nothing:

* every EndpointSlice lists exactly the Ready pods its Service selects (controllers caught up);
* on every node, the ruleset the proxy agent holds is the one `proxyagent.render` makes of the API's
  current Services and EndpointSlices (compared after canonical_sort), and so are the kube chains in
  the node's kernel (iptables-save), with no stale chain and none missing.
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from faultkit import REPO, Figures, OwnedEtcd, expected_kube_rules, kube_rules, rules_difference, wait_for

from kubelab import addressing
from kubelab.models import EndpointSlice, Service
from proxyagent import ProxyConfig, render
from proxyagent.canonical import canonical_sort

sys.path.insert(0, str(REPO / "tests" / "e2e"))
from kubelab_cluster import Cluster

pytestmark = pytest.mark.root

NODES = 2
PODS = "/api/v1/namespaces/default/pods"
SVCS = "/api/v1/namespaces/default/services"


def pod(name: str, app: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": app, "tier": "web"}},
            "spec": {"terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "web", "image": "example/web:1",
                                     "ports": [{"name": "http", "containerPort": 8080}]}]}}


def service(name: str, selector: dict[str, str], svc_type: str = "ClusterIP") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"type": svc_type, "selector": selector,
                     "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}}


class Churn:
    """Changes through the API from a thread, tolerating the outage (clients retry; so do we)."""

    def __init__(self, api: httpx.Client) -> None:
        self.api = api
        self.stop = threading.Event()
        self.done: Counter[str] = Counter()
        self.rng = random.Random(11)
        self.pods: list[str] = []
        self.extra: list[str] = []
        self.serial = 0

    def _call(self, what: str, method: str, path: str, **kwargs: Any) -> bool:
        try:
            resp = self.api.request(method, path, **kwargs)
        except httpx.HTTPError:
            self.done["failed (connection)"] += 1
            return False
        self.done[what if resp.status_code < 400 else f"failed ({resp.status_code})"] += 1
        return resp.status_code < 400

    def step(self) -> None:
        self.serial += 1
        choice = self.rng.random()
        if choice < 0.35 or len(self.pods) < 4:
            name = f"web-{self.serial}"
            if self._call("pods created", "POST", PODS, json=pod(name, self.rng.choice("ab"))):
                self.pods.append(name)
        elif choice < 0.55 and len(self.pods) > 3:
            name = self.pods.pop(self.rng.randrange(len(self.pods)))
            self._call("pods deleted", "DELETE", f"{PODS}/{name}")
        elif choice < 0.8:
            name = self.rng.choice(self.pods)
            self._call("pods relabelled", "PATCH", f"{PODS}/{name}",
                       json={"metadata": {"labels": {"app": self.rng.choice("ab")}}},
                       headers={"Content-Type": "application/merge-patch+json"})
        elif self.extra and self.rng.random() < 0.5:
            self._call("services deleted", "DELETE", f"{SVCS}/{self.extra.pop(0)}")
        else:
            name = f"extra-{self.serial}"
            if self._call("services created", "POST", SVCS, json=service(name, {"app": self.rng.choice("ab")},
                                                                           self.rng.choice(["ClusterIP", "NodePort"]))):
                self.extra.append(name)

    def run(self) -> None:
        while not self.stop.is_set():
            self.step()
            time.sleep(0.05)


def slice_problems(api: httpx.Client) -> list[str]:
    """Services whose EndpointSlices do not list exactly the Ready pods they select."""
    pods = api.get(PODS).json()["items"]
    slices = api.get("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices").json()["items"]
    problems = []
    for svc in api.get(SVCS).json()["items"]:
        selector = svc["spec"].get("selector")
        if not selector:
            continue
        want = {p["status"]["podIP"] for p in pods
                if selector.items() <= (p["metadata"].get("labels") or {}).items() and p["status"].get("podIP")
                and not p["metadata"].get("deletionTimestamp")
                and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])}
        have = {a for s in slices if s["metadata"]["labels"].get("kubernetes.io/service-name") == svc["metadata"]["name"]
                for e in s.get("endpoints") or [] if (e.get("conditions") or {}).get("ready") for a in e["addresses"]}
        if want != have:
            problems.append(f"service {svc['metadata']['name']}: slices list {sorted(have)}, ready pods {sorted(want)}")
    return problems


def workload_problems(api: httpx.Client) -> list[str]:
    not_running = [f"pod {p['metadata']['name']} is {p['status'].get('phase')} on {p['spec'].get('nodeName')}"
                   for p in api.get(PODS).json()["items"] if p["status"].get("phase") != "Running"]
    return not_running + slice_problems(api)


def expected_payload(api: httpx.Client, node: str, ip: str, *, random_fully: bool) -> str:
    services = [Service.from_dict(o) for o in api.get("/api/v1/services").json()["items"]]
    slices = [EndpointSlice.from_dict(o) for o in api.get("/apis/discovery.k8s.io/v1/endpointslices").json()["items"]]
    return render(services, slices, ProxyConfig(node_name=node, node_ips=(ip,), cluster_cidr=addressing.POD_CIDR,
                                                random_fully=random_fully)).text


def node_problems(cluster: Cluster, api: httpx.Client) -> list[str]:
    """Where a node's rules differ from the render of the API's current objects."""
    problems = []
    for node, where in cluster.state["nodes"].items():
        applied = (cluster.data_dir / "nodes" / node / "iptables.rules").read_text()
        # The agent asks iptables whether MASQUERADE takes --random-fully when it starts; that probe can
        # run before the kubelet has made the node's namespace and then answers no (reported). Render
        # with what the agent concluded: everything else must match.
        want = expected_payload(api, node, where["ip"], random_fully="--random-fully" in applied)
        if canonical_sort(applied) != canonical_sort(want):
            problems.append(f"{node}: the proxy agent's ruleset is not the render of the API's objects")
        saved = cluster.kubelab("iptables", "--data-dir", str(cluster.data_dir), node).stdout
        problems += [f"{node}: {p}" for p in rules_difference(kube_rules(saved), expected_kube_rules(want))]
    return problems


def test_components_resume_after_etcd_restarts(own_etcd: OwnedEtcd, tmp_path: Path, figures: Figures) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: `kubelab up --dataplane netns` (CI runs as root)")
    cluster = Cluster(tmp_path / "cluster" / "data", nodes=NODES,
                      extra_args=["--etcd-servers", own_etcd.url, "--min-sync-period", "0.2"])
    (tmp_path / "cluster").mkdir()
    cluster.start()
    try:
        with httpx.Client(base_url=cluster.server, timeout=30) as api:
            for name, selector, svc_type in (("web-a", {"app": "a"}, "ClusterIP"), ("web-b", {"app": "b"}, "NodePort"),
                                             ("web-all", {"tier": "web"}, "ClusterIP")):
                api.post(SVCS, json=service(name, selector, svc_type)).raise_for_status()
            churn = Churn(api)
            worker = threading.Thread(target=churn.run, daemon=True)
            worker.start()
            restarts = []
            try:
                for kill in (True, False):  # SIGKILL, then SIGTERM; each time started on the same dir and ports
                    time.sleep(4)
                    began = time.monotonic()
                    own_etcd.restart(kill=kill)
                    restarts.append(round(time.monotonic() - began, 2))
                time.sleep(4)
            finally:
                churn.stop.set()
                worker.join(30)
            settled = time.monotonic()
            try:
                wait_for("every pod Running and every EndpointSlice up to date", lambda: not workload_problems(api),
                         120, interval=0.5)
            except AssertionError:
                raise AssertionError("\n".join(workload_problems(api)[:20])) from None
            try:
                wait_for("every node's rules to match the API", lambda: not node_problems(cluster, api), 60,
                         interval=0.5)
            except AssertionError:
                raise AssertionError("\n".join(node_problems(cluster, api)[:20])) from None
            converged = time.monotonic() - settled
            operations = sum(v for k, v in churn.done.items() if not k.startswith("failed"))
            failed = sum(v for k, v in churn.done.items() if k.startswith("failed"))
            pods_now = len(api.get(PODS).json()["items"])
            services_now = len(api.get(SVCS).json()["items"])
    finally:
        code, left = cluster.shutdown()
    assert code == 0, f"kubelab up did not exit cleanly (exit {code}):\n{cluster.log()[-3000:]}"
    assert not left, left
    assert failed > 0, "the churn never met the outage: the restarts were not under load"
    figures.update(etcd_restarts=len(restarts), etcd_restart_seconds=restarts, changes_acknowledged=operations,
                   changes_refused_during_outage=failed, changes=dict(churn.done), pods=pods_now,
                   services=services_now, nodes=NODES, seconds_to_converge_after_churn=round(converged, 2),
                   missed_changes=0)
