"""Objects that bypassed validation (written straight into etcd) poison nothing else.

The API server now refuses a name ending in a newline (tests/integration/test_api_hostile_names.py), but
an object can still reach etcd another way: written by etcdctl, restored from a backup, stored by an
older, laxer server. Before this was fixed, one Service named "evil\\n" made every node's
iptables-restore fail, so no Service got rules; a Namespace "x\\n" stayed Terminating forever.

* A proxy agent (a process of its own, real iptables in a network namespace of this test) programs
  every valid Service while invalid ones sit in etcd — a Service named "evil\\n", one with a port named
  "p\\n", one whose port number is the string "80", a slice with port 70000 — before it starts and
  while it runs. The kernel's rules are exactly those of the valid objects (read back with
  iptables-save), the bad ones are counted in kubeproxy_sync_proxy_rules_skipped_objects (the
  undecodable one is left out by the informer) and logged once each, and no restore fails.
* A Namespace "x\\n" holding a ConfigMap, both written straight into etcd, is deleted through the API
  and finishes terminating: `kubelab controllers` empties and finalizes it.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import orjson
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

from apiserver.storage import Storage
from kubelab.etcd import free_port
from kubelab.models import EndpointSlice, Service
from kubelab.processes import stop_process
from proxyagent import render

SVC = "/api/v1/namespaces/default/services"
EPS = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"


class RawEtcd:
    """Writes objects straight into etcd, past the API server and its validation."""

    def __init__(self, url: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.storage = Storage([url])

    def put(self, key: str, obj: dict[str, Any]) -> None:
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", "2024-01-01T00:00:00Z")
        self.loop.run_until_complete(self.storage.put_raw(key, orjson.dumps(obj)))

    def close(self) -> None:
        self.loop.run_until_complete(self.storage.close())
        self.loop.close()


@pytest.fixture
def raw_etcd(own_etcd: OwnedEtcd) -> Iterator[RawEtcd]:
    raw = RawEtcd(own_etcd.url)
    try:
        yield raw
    finally:
        raw.close()


def raw_service(name: str, cluster_ip: str, *, port_name: str = "http", labels: dict[str, str] | None = None
                ) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
            "spec": {"type": "ClusterIP", "clusterIP": cluster_ip, "clusterIPs": [cluster_ip], "ipFamilies": ["IPv4"],
                     "sessionAffinity": "None", "ports": [{"name": port_name, "port": 80, "targetPort": 8080,
                                                           "protocol": "TCP"}]},
            "status": {"loadBalancer": {}}}


def raw_slice(name: str, service: str, *, port: int = 8080, ip: str = "10.244.1.9") -> dict[str, Any]:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": name, "namespace": "default", "labels": {"kubernetes.io/service-name": service}},
            "addressType": "IPv4", "endpoints": [{"addresses": [ip], "conditions": {"ready": True},
                                                  "nodeName": "node-1"}],
            "ports": [{"name": "http", "port": port, "protocol": "TCP"}]}


def good_service(api: httpx.Client, name: str, ip: str) -> None:
    created = api.post(SVC, json={"metadata": {"name": name}, "spec": {
        "ports": [{"name": "http", "port": 80, "targetPort": 8080}], "selector": {"app": name}}})
    assert created.status_code == 201, created.text
    sliced = api.post(EPS, json={
        "metadata": {"name": f"{name}-eps", "labels": {"kubernetes.io/service-name": name}}, "addressType": "IPv4",
        "endpoints": [{"addresses": [ip], "conditions": {"ready": True}, "nodeName": "node-1"}],
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]})
    assert sliced.status_code == 201, sliced.text


def samples(text: str) -> dict[str, float]:
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line and not line.startswith("#")}


BAD_SERVICES = {"evil\n", "named-port", "typed"}  # the name; a port named "p\n"; a port number "80"
BAD_SLICES = {"big-port"}  # port 70000


def expected_rules(api: httpx.Client) -> dict[tuple[str, str], list[str]]:
    """What the valid objects render to: everything the API lists but the invalid ones."""
    services = [Service.from_dict(o) for o in api.get("/api/v1/services").json()["items"]
                if o["metadata"]["name"] not in BAD_SERVICES]
    slices = [EndpointSlice.from_dict(o) for o in api.get("/apis/discovery.k8s.io/v1/endpointslices").json()["items"]
              if o["metadata"]["name"] not in BAD_SLICES]
    return expected_kube_rules(render(services, slices, config("node-1")).text)


@pytest.mark.root
def test_one_bad_object_in_etcd_leaves_every_other_service_programmed(
        own_etcd: OwnedEtcd, raw_etcd: RawEtcd, apiserver_process: Callable[..., ApiServerProcess], tmp_path: Path,
        figures: Figures) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: creates a network namespace and runs iptables in it (CI runs as root)")
    server = apiserver_process(own_etcd.url)
    metrics_port = free_port()
    log_path = tmp_path / "agent.log"
    with httpx.Client(base_url=server.url, timeout=30) as api, scratch_netns("klp") as netns:
        for i in range(3):
            good_service(api, f"good-{i}", f"10.244.1.{10 + i}")
        # Before the agent starts: in its first list.
        raw_etcd.put("/registry/services/default/evil\n", raw_service("evil\n", "10.96.200.1"))
        raw_etcd.put("/registry/endpointslices/default/evil-eps", raw_slice("evil-eps", "evil\n"))
        # A label value no rule spells out: the Service is programmed as any other.
        raw_etcd.put("/registry/services/default/labelled", raw_service("labelled", "10.96.200.3",
                                                                         labels={"app": "x\n"}))
        raw_etcd.put("/registry/endpointslices/default/stray-eps", raw_slice("stray-eps", "good-0\n", ip="10.244.9.9"))
        # Not even of the right type: a port number as a string no model takes.
        typed = raw_service("typed", "10.96.200.4")
        typed["spec"]["ports"][0]["port"] = "80"
        raw_etcd.put("/registry/services/default/typed", typed)
        with open(log_path, "wb") as log:
            agent = subprocess.Popen(
                [sys.executable, str(REPO / "tests" / "faults" / "proxy_agent_process.py"), "--server", server.url,
                 "--netns", netns, "--metrics-port", str(metrics_port)], stdout=log, stderr=subprocess.STDOUT,
                cwd=REPO, start_new_session=True)
        try:
            def scraped() -> dict[str, float]:
                try:
                    return samples(httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).text)
                except httpx.HTTPError:
                    return {}

            def kernel_matches() -> bool:
                return not rules_difference(kube_rules(iptables_save(netns)), expected_rules(api))

            wait_for("the valid Services' rules in the kernel", kernel_matches, 60, interval=0.2)
            # While it runs: over its watch.
            raw_etcd.put("/registry/services/default/named-port",
                         raw_service("named-port", "10.96.200.2", port_name="p\n"))
            raw_etcd.put("/registry/endpointslices/default/big-port", raw_slice("big-port", "good-1", port=70000))
            good_service(api, "good-late", "10.244.1.20")
            wait_for("the late Service's rules and the skipped objects counted",
                     lambda: kernel_matches() and scraped().get(
                         'kubeproxy_sync_proxy_rules_skipped_objects{kind="Service"}') == 2
                     and scraped().get('kubeproxy_sync_proxy_rules_skipped_objects{kind="EndpointSlice"}') == 1,
                     60, interval=0.2)
            good_service(api, "good-later", "10.244.1.21")  # one more sync: nothing is logged again
            wait_for("the last Service's rules", kernel_matches, 60, interval=0.2)
            saved = iptables_save(netns)
            metrics = scraped()
        finally:
            stop_process(agent)
    agent_log = log_path.read_text()
    rules = "\n".join(line for lines in kube_rules(saved).values() for line in lines)
    for i in range(3):
        assert f'-A KUBE-SERVICES -d {api_ip(saved, f"good-{i}")}/32 -p tcp -m comment --comment ' \
               f'"default/good-{i}:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-' in rules
    assert '"default/labelled:http has no endpoints"' in rules  # programmed: it has no endpoints
    assert "evil" not in saved and "named-port" not in saved and "10.244.9.9" not in saved and ":70000" not in saved
    assert metrics['kubeproxy_sync_proxy_rules_invalid_objects_total{kind="Service"}'] == 2
    assert metrics['kubeproxy_sync_proxy_rules_invalid_objects_total{kind="EndpointSlice"}'] == 1
    assert metrics["kubeproxy_sync_proxy_rules_iptables_restore_failures_total"] == 0
    assert agent_log.count("leaving Service 'default/evil\\n' out of the proxy rules") == 1, agent_log[-3000:]
    assert agent_log.count("leaving Service 'default/named-port' out of the proxy rules") == 1
    assert agent_log.count("leaving EndpointSlice 'default/big-port' out of the proxy rules") == 1
    assert agent_log.count("informer: leaving out 'default/typed', it does not decode") == 1, agent_log[-3000:]
    assert "typed" not in saved
    figures.update(raw_objects_planted=7, invalid_objects_planted=4, skipped_services=2, skipped_slices=1,
                   undecodable_services=1, restore_failures=0,
                   full_syncs=metrics["kubeproxy_sync_full_proxy_rules_duration_seconds_count"],
                   syncs=metrics["kubeproxy_sync_proxy_rules_duration_seconds_count"])


def api_ip(saved: str, name: str) -> str:
    """The cluster IP iptables-save shows for a Service (from its own comment)."""
    for line in saved.splitlines():
        if f'"default/{name}:http cluster IP"' in line and line.startswith("-A KUBE-SERVICES -d "):
            return line.split()[3].removesuffix("/32")
    raise AssertionError(f"no cluster IP rule for {name} in:\n{saved}")


def test_a_namespace_stored_with_a_newline_finishes_terminating(
        own_etcd: OwnedEtcd, raw_etcd: RawEtcd, apiserver_process: Callable[..., ApiServerProcess], tmp_path: Path,
        figures: Figures) -> None:
    server = apiserver_process(own_etcd.url)
    raw_etcd.put("/registry/namespaces/x\n", {
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "x\n", "labels": {"kubernetes.io/metadata.name": "x\n"}},
        "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
    raw_etcd.put("/registry/configmaps/x\n/settings", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "x\n"},
        "data": {"k": "v"}})
    path = f"/api/v1/namespaces/{quote('x' + chr(10), safe='')}"
    with open(tmp_path / "controllers.log", "wb") as log:
        controllers = subprocess.Popen(
            [sys.executable, "-m", "kubelab", "controllers", "--server", server.url, "--metrics-bind-address", ""],
            stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as api:
            # The API server's watch cache hears of the raw write through etcd's watch, a moment later.
            wait_for("the API server to see the namespace", lambda: api.get(path).status_code == 200, 30)
            deleted = api.delete(path)
            assert deleted.status_code == 200, deleted.text
            assert deleted.json()["status"]["phase"] == "Terminating"
            wait_for("the namespace to finish terminating", lambda: api.get(path).status_code == 404, 60,
                     interval=0.2)
            assert api.get(f"{path}/configmaps/settings").status_code == 404
    finally:
        stop_process(controllers)
    figures.update(namespace_finalized=True)
