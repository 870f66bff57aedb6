"""`kubelab explain pod`'s pure core: every node's filter verdict in kube-scheduler's words, every
feasible node's per-plugin scores and total, and the mark on the node picked (or to be picked)."""

from __future__ import annotations

from typing import Any

from kubelab.models import Node, Pod
from scheduler.explain import explain, render

CONTROL_PLANE = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}


def node(name: str, cpu: str = "4", *, taints: list[dict[str, str]] | None = None) -> Node:
    return Node.from_dict({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                           "spec": {"taints": taints} if taints else {},
                           "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}})


def pod(name: str, cpu: str, *, on: str | None = None, **spec: Any) -> Pod:
    body: dict[str, Any] = {"containers": [{"name": "c", "image": "nginx",
                                            "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}], **spec}
    if on:
        body["nodeName"] = on
    return Pod.from_dict({"metadata": {"name": name, "namespace": "default"}, "spec": body,
                          "status": {"phase": "Running" if on else "Pending"}})


NODES = [node("control-plane", taints=[CONTROL_PLANE]), node("node-1"), node("node-2"), node("node-3", cpu="1")]


def test_pending_pod_table() -> None:
    text = render(explain(pod("web", "1500m"), NODES, [pod("old", "2", on="node-1")]))
    assert text == """\
Pod default/web: requests cpu 1500m, memory 1Gi
Status: Pending: would be scheduled

NODE           FILTER            RESULT                                                                   FIT(x1)  BALANCED(x1)  TAINTS(x3)  TOTAL
node-2         passed            fits                                                                     74       87            100         461    <- would pick
node-1         passed            fits                                                                     43       68            100         411
control-plane  TaintToleration   node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }  -        -             -           -
node-3         NodeResourcesFit  Insufficient cpu                                                         -        -             -           -

Filters run in kube-scheduler's order; a node's verdict is the first filter that rejects it.
Scores are 0-100 per plugin; TOTAL = sum of score x weight; the highest total wins, ties at random.
  FIT = NodeResourcesFit (LeastAllocated: cpu and memory, containers without requests count 100m / 200Mi)
  BALANCED = NodeResourcesBalancedAllocation (cpu and memory use kept even)
  TAINTS = TaintToleration (fewer untolerated PreferNoSchedule taints is better)
"""


def test_pod_that_fits_nowhere_gets_the_failed_scheduling_text() -> None:
    expl = explain(pod("big", "5"), NODES, [])
    assert expl.message == ("0/4 nodes are available: 1 node(s) had untolerated taint "
                            "{node-role.kubernetes.io/control-plane: }, 3 Insufficient cpu.")
    assert [(v.name, v.plugin, v.reasons) for v in expl.nodes] == [
        ("control-plane", "TaintToleration", ["node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }"]),
        ("node-1", "NodeResourcesFit", ["Insufficient cpu"]),
        ("node-2", "NodeResourcesFit", ["Insufficient cpu"]),
        ("node-3", "NodeResourcesFit", ["Insufficient cpu"])]
    assert "Status: Pending: 0/4 nodes are available:" in render(expl)


def test_bound_pod_is_explained_without_itself() -> None:
    web = pod("web", "3", on="node-2")
    expl = explain(web, NODES, [web, pod("old", "2", on="node-1")])
    verdicts = {v.name: v for v in expl.nodes}
    assert verdicts["node-2"].mark == "picked"
    assert verdicts["node-2"].feasible  # its own 3 cpu are not counted against it
    assert verdicts["node-1"].reasons == ["Insufficient cpu"]
    assert "bound to node-2" in render(expl)


def test_ties_are_all_marked() -> None:
    expl = explain(pod("web", "1"), [node("a"), node("b")], [])
    assert [(v.name, v.total, v.mark) for v in expl.nodes] == [
        ("a", 474, "tied: one is picked at random"), ("b", 474, "tied: one is picked at random")]


def test_prefilter_pins() -> None:
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-3"]}]}]}}}
    expl = explain(pod("ds", "2", affinity=affinity), NODES, [])
    assert expl.message == ("0/4 nodes are available: 1 Insufficient cpu, "
                            "3 node(s) didn't satisfy plugin(s) [NodeAffinity].")
    assert {v.name: v.plugin for v in expl.nodes}["node-1"] == "NodeAffinity (PreFilter)"
