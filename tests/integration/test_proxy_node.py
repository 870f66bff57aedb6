"""`kubelab node` as its own process: its proxy agent follows the API and serves kube-proxy's metrics
on --metrics-bind-address. Render dataplane (no root): the rules land in the node's state file.

A private etcd and API server: the Node this registers must not show up in other modules' clusters.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import polling
from apitools import ns_path, unique_name

from kubelab.etcd import free_port

ROOT = Path(__file__).resolve().parents[2]


def wait_for(what: str, check: Callable[[], Any], timeout: float = 30.0) -> Any:
    return polling.wait_for(what, check, timeout, retry_on=(httpx.HTTPError,))


def samples(text: str) -> dict[str, float]:
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line and not line.startswith("#")}


def test_node_serves_proxy_metrics_and_follows_services(private_api: str, tmp_path: Path) -> None:
    node, port = unique_name("node"), free_port()
    metrics_url = f"http://127.0.0.1:{port}"
    argv = [sys.executable, "-m", "kubelab", "node", "--name", node, "--server", private_api,
            "--metrics-bind-address", f"127.0.0.1:{port}", "--min-sync-period", "0.1", "--data-dir", str(tmp_path)]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        def synced_once() -> dict[str, float] | None:
            scraped = samples(httpx.get(f"{metrics_url}/metrics").text)
            return scraped if scraped.get("kubeproxy_sync_proxy_rules_last_timestamp_seconds", 0) > 0 else None

        first = wait_for("the first sync", synced_once)
        assert first["kubeproxy_sync_full_proxy_rules_duration_seconds_count"] == 1
        health = httpx.get(f"{metrics_url}/healthz")
        assert health.status_code == 200 and health.json()["lastUpdated"].endswith("Z")

        name = unique_name("web")
        with httpx.Client(base_url=private_api, timeout=10) as api:
            created = api.post(ns_path("services"), json={
                "apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                "spec": {"ports": [{"name": "http", "port": 80}], "selector": {"app": name}}})
            assert created.status_code == 201, created.text
            cluster_ip = created.json()["spec"]["clusterIP"]
            state = tmp_path / "nodes" / node / "iptables.rules"
            # No endpoints yet: kube-proxy REJECTs the cluster IP.
            wait_for("the REJECT rule", lambda: state.exists() and
                     f'"default/{name}:http has no endpoints"' in state.read_text())
            slice_body = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                          "metadata": {"name": f"{name}-1", "labels": {"kubernetes.io/service-name": name}},
                          "addressType": "IPv4", "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
                          "endpoints": [{"addresses": ["10.244.1.9"], "conditions": {"ready": True}}]}
            made = api.post(ns_path("endpointslices", group="discovery.k8s.io/v1"), json=slice_body)
            assert made.status_code == 201, made.text
            wait_for("the DNAT rule", lambda: "--to-destination 10.244.1.9:8080" in state.read_text())
            assert f"-d {cluster_ip} --dport 80 -j KUBE-SVC-" in state.read_text()

        after = samples(httpx.get(f"{metrics_url}/metrics").text)
        assert after["kubeproxy_sync_partial_proxy_rules_duration_seconds_count"] >= 1
        assert after["kubeproxy_sync_proxy_rules_service_changes_total"] > first[
            "kubeproxy_sync_proxy_rules_service_changes_total"]
        assert after["kubeproxy_sync_proxy_rules_endpoint_changes_total"] > first[
            "kubeproxy_sync_proxy_rules_endpoint_changes_total"]
    finally:
        proc.terminate()
        try:
            out, _ = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
    assert proc.returncode == 0, out.decode(errors="replace")[-3000:]
