"""`kubelab trace` on the netns dataplane: the seed's Service applied with kubectl, then its trace shows
the write accepted, delivered to the controllers and every node's proxy agent, the endpoints written and
every node's real iptables-restore done, in that order (presence and order only, never durations)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kubelab_cluster import Cluster, wait_for

MANIFEST = Path(__file__).resolve().parents[2] / "examples" / "clusterip-svc.yaml"


def test_trace_of_the_seed_service_on_real_iptables(cluster: Cluster) -> None:
    nodes = set(cluster.state["nodes"])
    cluster.kubectl("apply", "-f", str(MANIFEST))

    def traced() -> dict[str, Any] | None:
        done = cluster.kubelab("trace", "service/clusterip-svc", "-o", "json", "--data-dir", str(cluster.data_dir),
                               check=False)
        result: dict[str, Any] = json.loads(done.stdout) if done.stdout.strip() else {}
        applied = {s["component"].removeprefix("proxy ") for s in result.get("steps", [])
                   if s["step"] == "rules applied"}
        written = [s for s in result.get("steps", []) if s["step"] == "endpoints written"
                   and "endpointslice-controller" in s["detail"]]
        return result if applied == nodes and written else None

    result = wait_for("the Service applied on every node", traced, timeout=90)
    steps = result["steps"]
    assert steps[0]["step"] == "accepted"
    order = [s["step"] for s in steps]
    assert order.index("endpoints written") < min(i for i, s in enumerate(order) if s == "rules applied")
    delivered = {s["component"] for s in steps if s["step"] == "delivered"}
    assert "kubelab-controllers" in delivered
    assert "kubelab-proxy" in delivered  # the nodes' agents share one watch per kind in `kubelab up`
    assert all(s["took"] is not None for s in steps if s["step"] == "rules applied")
    times = [s["sinceAccepted"] for s in steps]
    assert times == sorted(times)
    cluster.kubectl("delete", "-f", str(MANIFEST), "--wait=false")
