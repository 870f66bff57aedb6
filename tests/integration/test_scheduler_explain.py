"""`kubelab explain pod NAME` against the real API server: one row per node with the filter verdict in
kube-scheduler's words, scores for the nodes that pass, and the node the scheduler would pick."""

from __future__ import annotations

import httpx
import pytest
from schedulerkit import node_body, pod_body, unique

from launcher.cli import main

CORE = "/api/v1"


def _delete_all_nodes(api: httpx.Client) -> None:
    for node in api.get(f"{CORE}/nodes").json()["items"]:
        api.delete(f"{CORE}/nodes/{node['metadata']['name']}")


def test_explain_pod(api: httpx.Client, apiserver: str, capsys: pytest.CaptureFixture[str]) -> None:
    _delete_all_nodes(api)  # leftovers of finished tests would be rows too
    ns = unique("explain")
    nodes = {"big": unique("big"), "small": unique("small"), "tainted": unique("tainted")}
    assert api.post(f"{CORE}/namespaces", json={"metadata": {"name": ns}}).status_code == 201
    try:
        api.post(f"{CORE}/nodes", json=node_body(nodes["big"], cpu="8")).raise_for_status()
        api.post(f"{CORE}/nodes", json=node_body(nodes["small"], cpu="1")).raise_for_status()
        api.post(f"{CORE}/nodes", json=node_body(nodes["tainted"], taints=[
            {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}])).raise_for_status()
        api.post(f"{CORE}/namespaces/{ns}/pods", json=pod_body("web", "nobody", cpu="2")).raise_for_status()

        assert main(["explain", "pod", "web", "-n", ns, "--server", apiserver]) == 0
        out = capsys.readouterr().out
        rows = {line.split()[0]: line for line in out.splitlines() if line.split() and line.split()[0] in nodes.values()}
        assert out.startswith(f"Pod {ns}/web: requests cpu 2, memory 0\nStatus: Pending: would be scheduled\n")
        assert rows[nodes["big"]].split()[1:3] == ["passed", "fits"]
        assert rows[nodes["big"]].endswith("<- would pick")
        assert "NodeResourcesFit  Insufficient cpu" in rows[nodes["small"]]
        assert ("TaintToleration   node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }"
                in rows[nodes["tainted"]])

        assert main(["explain", "pod", "missing", "-n", ns, "--server", apiserver]) == 1
        assert 'pods "missing" not found' in capsys.readouterr().err
    finally:
        api.delete(f"{CORE}/namespaces/{ns}/pods/web")
        for name in nodes.values():
            api.delete(f"{CORE}/nodes/{name}")
