"""kube-scheduler's scoring (reference/scheduler-and-nodes.md §2) with worked arithmetic: integer
LeastAllocated/MostAllocated over cpu and memory with the non-zero defaults (100m / 200Mi) for
containers that request nothing, float BalancedAllocation over real requests, and the pick in decide()."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kubelab.models import Node, Pod
from scheduler import score
from scheduler.algorithm import score_feasible
from scheduler.cache import Cache, NodeInfo
from scheduler.fit import PodContext
from scheduler.resources import pod_nonzero_requests, pod_requests
from scheduler.scheduling import decide


def container(name: str = "c", cpu: str | None = None, memory: str | None = None) -> dict[str, Any]:
    reqs = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    return {"name": name, "image": "nginx", "resources": {"requests": reqs} if reqs else {}}


def pod(name: str = "p", cpu: str | None = None, memory: str | None = None, *,
        containers: list[dict[str, Any]] | None = None) -> Pod:
    return Pod.from_dict({"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
                          "spec": {"containers": containers or [container(cpu=cpu, memory=memory)]},
                          "status": {"phase": "Pending"}})


def info(cpu: str = "4", memory: str = "8Gi", *bound: Pod, name: str = "n1") -> NodeInfo:
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110"}
    cache = Cache()
    cache.set_node(Node.from_dict({"metadata": {"name": name}, "status": {"allocatable": allocatable}}))
    for p in bound:
        assert p.spec is not None
        cache.set_pod(p.model_copy(update={"spec": p.spec.model_copy(update={"node_name": name})}))
    return cache.nodes[name]


@pytest.mark.parametrize(("p", "where", "least", "most"), [
    # cpu (4000-2000)*100/4000 = 50, memory (8-4)*100/8 = 50 -> (50+50)/2
    pytest.param(pod(cpu="1", memory="2Gi"), info("4", "8Gi", pod("old", "1", "2Gi")), 50, 50,
                 id="half used: 50 either way"),
    # least: cpu 2500*100//4000 = 62, memory 7*100//8 = 87 -> 149//2 = 74; most: 37 and 12 -> 49//2 = 24
    pytest.param(pod(cpu="1500m", memory="1Gi"), info(), 74, 24, id="integer division at every step"),
    # no requests count 100m and 200Mi: least cpu 900*100//1000 = 90, memory 824Mi*100//1Gi = 80 -> 85;
    # most 10 and 19 -> 14
    pytest.param(pod(), info("1", "1Gi"), 85, 14, id="non-zero defaults for the pod"),
    # the node side uses the same defaults for the pod it already runs: 200m and 400Mi -> least 80 and 60,
    # most 20 and 39
    pytest.param(pod(), info("1", "1Gi", pod("old")), 70, 29, id="non-zero defaults on the node"),
    # an explicit zero is not defaulted: cpu 100, memory 100
    pytest.param(pod(cpu="0", memory="0"), info("1", "1Gi"), 100, 0, id="explicit zero requests"),
    # cpu over capacity scores 0 (least) or is capped at 100 (most); memory 200Mi of 1Gi -> 80 / 19
    pytest.param(pod(cpu="2"), info("1", "1Gi"), 40, 59, id="over capacity"),
    # a resource the node does not offer is left out of the mean, not averaged in as 0
    pytest.param(pod(cpu="500m", memory="1Gi"), info("1", "0"), 50, 50, id="no memory allocatable"),
    pytest.param(pod(cpu="500m"), info("0", "0"), 0, 0, id="nothing allocatable"),
])
def test_fit_scores(p: Pod, where: NodeInfo, least: int, most: int) -> None:
    nonzero = pod_nonzero_requests(p)
    assert score.least_allocated(nonzero, where) == least
    assert score.most_allocated(nonzero, where) == most


@pytest.mark.parametrize(("p", "where", "balanced"), [
    # cpu 2/4 = 0.5, memory 2/8 = 0.25: std |0.5-0.25|/2 = 0.125 -> trunc(87.5) = 87
    pytest.param(pod(cpu="2", memory="2Gi"), info(), 87, id="uneven"),
    pytest.param(pod(cpu="1", memory="2Gi"), info(), 100, id="even"),
    pytest.param(pod(), info(), 100, id="real requests, no defaults: nothing is even"),
    # cpu 8/4 is capped at 1.0, memory 0: std 0.5 -> 50
    pytest.param(pod(cpu="8"), info(), 50, id="fraction capped at 1"),
    # node already at cpu 1/4; pod adds 1 cpu and 4Gi: 0.5 and 0.5
    pytest.param(pod(cpu="1", memory="4Gi"), info("4", "8Gi", pod("old", "1")), 100, id="node's requests count"),
    pytest.param(pod(cpu="1"), info("4", "0"), 100, id="one resource: no deviation"),
])
def test_balanced_allocation(p: Pod, where: NodeInfo, balanced: int) -> None:
    assert score.balanced_allocation(pod_requests(p), where) == balanced


def two_nodes() -> list[NodeInfo]:
    return [info(name="n1"), info("4", "8Gi", pod("old", "2", "4Gi"), name="n2")]


def test_least_allocated_prefers_the_emptier_node() -> None:
    # n1: least (75+87)//2 = 81, balanced 0.25/0.125 -> 93: 174; n2: least (25+37)//2 = 31 + 93 = 124;
    # plus TaintToleration 100 x 3 on both (no PreferNoSchedule taints anywhere)
    decision = decide(pod(cpu="1", memory="1Gi"), two_nodes())
    assert decision.scores == {"n1": 474, "n2": 424}
    assert decision.node == "n1"
    assert decision.reasons == {}


def test_most_allocated_packs_the_fuller_node() -> None:
    # n1: most (25+12)//2 = 18 + 93 = 111; n2: most (75+62)//2 = 68 + 93 = 161; + 300 TaintToleration
    decision = decide(pod(cpu="1", memory="1Gi"), two_nodes(), strategy="MostAllocated")
    assert decision.scores == {"n1": 411, "n2": 461}
    assert decision.node == "n2"


def test_single_feasible_node_is_chosen_without_scoring() -> None:
    decision = decide(pod(cpu="3", memory="1Gi"), two_nodes())
    assert decision.node == "n1"
    assert decision.scores == {"n1": 0}
    assert decision.reasons == {"n2": ["Insufficient cpu"]}


def test_ties_are_broken_at_random() -> None:
    nodes = [info(name="n1"), info(name="n2"), info(name="n3")]
    picks = {decide(pod(cpu="1"), nodes, rng=random.Random(seed)).node for seed in range(40)}
    assert picks == {"n1", "n2", "n3"}
    again = {decide(pod(cpu="1"), nodes, rng=random.Random(7)).node for _ in range(5)}
    assert len(again) == 1  # the same seed, the same pick


# --- TaintToleration and NodeAffinity scores, and the one-pass total ------------------------------

def tainted(name: str, *taints: tuple[str, str], labels: dict[str, str] | None = None) -> NodeInfo:
    cache = Cache()
    cache.set_node(Node.from_dict({"metadata": {"name": name, "labels": labels or {}},
                                   "spec": {"taints": [{"key": k, "value": v, "effect": "PreferNoSchedule"}
                                                       for k, v in taints]},
                                   "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}))
    return cache.nodes[name]


def with_spec(p: Pod, **spec: Any) -> Pod:
    return Pod.from_dict({**p.to_dict(), "spec": {**p.to_dict()["spec"], **spec}})


@pytest.mark.parametrize(("p", "expected"), [
    # raw counts 0, 1, 2 -> max 2 -> 100 - 100*c/2, reversed
    pytest.param(pod(), {"a": 100, "b": 50, "c": 0}, id="fewer untolerated PreferNoSchedule taints is better"),
    pytest.param(with_spec(pod(), tolerations=[{"key": "x", "operator": "Exists", "effect": "PreferNoSchedule"}]),
                 {"a": 100, "b": 100, "c": 0}, id="a tolerated taint does not count"),
    pytest.param(with_spec(pod(), tolerations=[{"key": "x", "operator": "Exists", "effect": "NoSchedule"}]),
                 {"a": 100, "b": 50, "c": 0}, id="only empty or PreferNoSchedule tolerations count"),
    pytest.param(with_spec(pod(), tolerations=[{"operator": "Exists"}]), {"a": 100, "b": 100, "c": 100},
                 id="tolerating everything: all zero reversed to 100"),
])
def test_taint_toleration_score(p: Pod, expected: dict[str, int]) -> None:
    nodes = [tainted("a"), tainted("b", ("x", "1")), tainted("c", ("x", "1"), ("y", "2"))]
    assert score.plugin_scores(PodContext(p), nodes)[score.TAINT_TOLERATION] == expected


def test_node_affinity_preferred_score() -> None:
    preferred = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 30, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}},
        {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}}]}}
    nodes = [tainted("ssd-zoned", labels={"disk": "ssd", "zone": "a"}), tainted("ssd", labels={"disk": "ssd"}),
             tainted("zoned", labels={"zone": "a"}), tainted("plain")]
    ctx = PodContext(with_spec(pod(cpu="1"), affinity=preferred))
    # raw 40, 30, 10, 0 -> 100*s/40
    assert score.plugin_scores(ctx, nodes)[score.NODE_AFFINITY] == {"ssd-zoned": 100, "ssd": 75, "zoned": 25,
                                                                    "plain": 0}
    assert decide(ctx.pod, nodes).node == "ssd-zoned"
    assert score.NODE_AFFINITY not in score.plugin_scores(PodContext(pod(cpu="1")), nodes)  # PreScore: Skip


@pytest.mark.parametrize("strategy", ["LeastAllocated", "MostAllocated"])
def test_one_pass_totals_match_the_plugins(strategy: str) -> None:
    rng = random.Random(42)
    for round_ in range(30):
        nodes = []
        for i in range(12):
            bound = [pod(f"b{round_}-{i}-{j}", f"{rng.randint(0, 900)}m", f"{rng.randint(0, 900)}Mi")
                     for j in range(rng.randint(0, 3))]
            nodes.append(info(str(rng.choice(["1", "2", "4"])), rng.choice(["1Gi", "2Gi", "0"]), *bound,
                              name=f"n{i}"))
        nodes[3] = tainted("n3", ("x", "1"))
        p = pod("p", rng.choice([None, "100m", "1"]), rng.choice([None, "64Mi", "1Gi"]))
        ctx = PodContext(p)
        expected = score.total_scores(score.plugin_scores(ctx, nodes, strategy))
        assert score_feasible(ctx, nodes, strategy) == expected
