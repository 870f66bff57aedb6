"""kube-scheduler's filters (reference/scheduler-and-nodes.md §1, §3, §4): what a pod requests, which
node rejects it with which reason (first failing filter wins), the FailedScheduling message, and the
cache's assume/forget accounting that keeps a burst of decisions from over-committing a node."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kubelab.models import Node, Pod, Taint, Toleration
from kubelab.nodeaffinity import toleration_matches
from scheduler.algorithm import num_feasible_nodes_to_find
from scheduler.cache import Cache, NodeInfo
from scheduler.fit import failure_message, fits, truncate_note
from scheduler.resources import pod_nonzero_requests, pod_requests
from scheduler.scheduling import decide

GI = 2**30
MI = 2**20


def container(name: str = "c", cpu: str | None = None, memory: str | None = None, *, sidecar: bool = False,
              ports: list[dict[str, Any]] | None = None, requests: dict[str, str] | None = None) -> dict[str, Any]:
    reqs = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    reqs.update(requests or {})
    out: dict[str, Any] = {"name": name, "image": "nginx", "resources": {"requests": reqs} if reqs else {}}
    if sidecar:
        out["restartPolicy"] = "Always"
    if ports:
        out["ports"] = ports
    return out


def pod(name: str = "p", *, containers: list[dict[str, Any]] | None = None, init: list[dict[str, Any]] | None = None,
        node_name: str | None = None, phase: str = "Pending", **spec: Any) -> Pod:
    body: dict[str, Any] = {"containers": containers if containers is not None else [container()], **spec}
    if init:
        body["initContainers"] = init
    if node_name:
        body["nodeName"] = node_name
    return Pod.from_dict({"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
                          "spec": body, "status": {"phase": phase}})


def node(name: str = "n1", cpu: str = "4", memory: str = "8Gi", pods: str | None = "110", *,
         labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None,
         unschedulable: bool = False, extra: dict[str, str] | None = None) -> Node:
    allocatable = {"cpu": cpu, "memory": memory, **(extra or {})}
    if pods is not None:
        allocatable["pods"] = pods
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return Node.from_dict({"apiVersion": "v1", "kind": "Node",
                           "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
                           "spec": spec, "status": {"capacity": allocatable, "allocatable": allocatable}})


def info(n: Node, *bound: Pod) -> NodeInfo:
    """The node as the scheduler cache sees it once `bound` pods run there."""
    cache = Cache()
    cache.set_node(n)
    for p in bound:
        assert p.spec is not None
        cache.set_pod(p.model_copy(update={"spec": p.spec.model_copy(update={"node_name": n.metadata.name})}))
    return cache.nodes[n.metadata.name or ""]


# --- what a pod requests -------------------------------------------------------------------------

@pytest.mark.parametrize(("p", "cpu", "memory"), [
    pytest.param(pod(containers=[container(cpu="500m", memory="1Gi"), container("d", cpu="250m")]), 750, GI,
                 id="containers add up"),
    pytest.param(pod(containers=[container()]), 0, 0, id="no requests are zero for filtering"),
    pytest.param(pod(containers=[container(cpu="2", memory="1G"), container("c2", cpu="1", memory="1G")],
                     init=[container("ic1", cpu="2", memory="1G"), container("ic2", cpu="2", memory="3G")]),
                 3000, 3 * 10**9, id="reference 1.3 example: max(sum, largest init container)"),
    pytest.param(pod(containers=[container(cpu="1")], init=[container("ic", cpu="3")]), 3000, 0,
                 id="one big init container"),
    pytest.param(pod(containers=[container(cpu="2")], init=[container("sc", cpu="1", sidecar=True),
                                                            container("ic", cpu="2")]),
                 3000, 0, id="sidecar adds to the containers and to later init steps"),
    pytest.param(pod(containers=[container(cpu="1")], init=[container("ic", cpu="2"),
                                                            container("sc", cpu="1", sidecar=True)]),
                 2000, 0, id="sidecar after an init container does not add to it"),
    pytest.param(pod(containers=[container(cpu="100m")], init=[container("sc", cpu="1", sidecar=True),
                                                               container("ic", cpu="3")]),
                 4000, 0, id="init step runs beside the sidecars started before it"),
    pytest.param(pod(containers=[container(cpu="1", memory="1Gi")], overhead={"cpu": "250m", "memory": "120Mi"}),
                 1250, GI + 120 * MI, id="overhead is added last"),
])
def test_pod_requests(p: Pod, cpu: int, memory: int) -> None:
    req = pod_requests(p)
    assert (req.milli_cpu, req.memory) == (cpu, memory)


@pytest.mark.parametrize(("p", "cpu", "memory"), [
    pytest.param(pod(containers=[container()]), 100, 200 * MI, id="defaults 100m and 200Mi"),
    pytest.param(pod(containers=[container(cpu="0", memory="0")]), 0, 0, id="explicit zero stays zero"),
    pytest.param(pod(containers=[container(cpu="1")]), 1000, 200 * MI, id="only the missing one is defaulted"),
    pytest.param(pod(containers=[container(), container("d")]), 200, 400 * MI, id="per container"),
    pytest.param(pod(containers=[container(cpu="50m", memory="10Mi")], init=[container("ic")]), 100, 200 * MI,
                 id="init container without requests counts the defaults"),
    pytest.param(pod(containers=[container(cpu="1", memory="1Gi")], init=[container("sc", sidecar=True)]),
                 1100, GI + 200 * MI, id="sidecar without requests counts the defaults"),
    pytest.param(pod(containers=[container()], overhead={"cpu": "10m", "memory": "1Mi"}), 110, 201 * MI,
                 id="overhead is not defaulted, just added"),
])
def test_pod_nonzero_requests(p: Pod, cpu: int, memory: int) -> None:
    assert pod_nonzero_requests(p) == (cpu, memory)


# --- filters ---------------------------------------------------------------------------------------

def taint(key: str, value: str = "", effect: str = "NoSchedule") -> dict[str, str]:
    return {"key": key, "value": value, "effect": effect} if value else {"key": key, "effect": effect}


def required_affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


ZONE_A = node(labels={"zone": "a", "gpus": "4"})
BUSY = pod("busy", containers=[container(cpu="3", memory="6Gi")])
HOST_80 = [{"containerPort": 80, "hostPort": 80}]
UNTOLERATED = "node(s) had untolerated taint {dedicated: db}"


@pytest.mark.parametrize(("p", "where", "reasons"), [
    pytest.param(pod(containers=[container(cpu="1", memory="1Gi")]), info(node()), [], id="fits"),
    # NodeResourcesFit
    pytest.param(pod(containers=[container(cpu="2")]), info(node(), BUSY), ["Insufficient cpu"],
                 id="insufficient cpu"),
    pytest.param(pod(containers=[container(memory="3Gi")]), info(node(), BUSY), ["Insufficient memory"],
                 id="insufficient memory"),
    pytest.param(pod(containers=[container(cpu="2", memory="3Gi")]), info(node(), BUSY),
                 ["Insufficient cpu", "Insufficient memory"], id="one filter, every short resource"),
    pytest.param(pod(containers=[container(cpu="1")]), info(node(), BUSY), [], id="exactly the rest fits"),
    pytest.param(pod(containers=[container(cpu="1001m")]), info(node(), BUSY), ["Insufficient cpu"],
                 id="one millicore too many"),
    pytest.param(pod(containers=[container()]), info(node(pods="1"), BUSY), ["Too many pods"],
                 id="too many pods even without requests"),
    pytest.param(pod(containers=[container(cpu="2")]), info(node(pods="1"), BUSY), ["Too many pods", "Insufficient cpu"],
                 id="pods first, then resources"),
    pytest.param(pod(containers=[container()]), info(node(pods=None)), ["Too many pods"],
                 id="no allocatable pods rejects everything"),
    pytest.param(pod(containers=[container()]), info(node(cpu="0", memory="0")), [],
                 id="a pod requesting nothing only needs a pod slot"),
    pytest.param(pod(containers=[container(requests={"ephemeral-storage": "2Gi"})]),
                 info(node(extra={"ephemeral-storage": "1Gi"})),
                 ["Insufficient ephemeral-storage"], id="ephemeral storage"),
    pytest.param(pod(containers=[container(requests={"nvidia.com/gpu": "1"})]), info(node()),
                 ["Insufficient nvidia.com/gpu"], id="extended resource absent from the node"),
    pytest.param(pod(containers=[container(requests={"nvidia.com/gpu": "1"})]),
                 info(node(extra={"nvidia.com/gpu": "1"})),
                 [], id="extended resource present"),
    pytest.param(pod(containers=[container(cpu="2", memory="1G"), container("c2", cpu="1", memory="1G")],
                     init=[container("ic1", cpu="2", memory="1G"), container("ic2", cpu="2", memory="3G")]),
                 info(node(cpu="2500m", memory="4G")), ["Insufficient cpu"], id="init container example: 3 cpu"),
    pytest.param(pod(containers=[container(cpu="1")], init=[container("sc", cpu="1", sidecar=True)]),
                 info(node(cpu="1500m")), ["Insufficient cpu"], id="sidecar counts"),
    pytest.param(pod(containers=[container(cpu="1")], overhead={"cpu": "600m"}), info(node(cpu="1500m")),
                 ["Insufficient cpu"], id="overhead counts"),
    # TaintToleration
    pytest.param(pod(), info(node(taints=[taint("dedicated", "db")])), [UNTOLERATED], id="untolerated taint"),
    pytest.param(pod(), info(node(taints=[taint("node.kubernetes.io/not-ready")])),
                 ["node(s) had untolerated taint {node.kubernetes.io/not-ready: }"], id="taint without value"),
    pytest.param(pod(), info(node(taints=[taint("dedicated", "db", "NoExecute")])), [UNTOLERATED], id="NoExecute"),
    pytest.param(pod(), info(node(taints=[taint("dedicated", "db", "PreferNoSchedule")])), [],
                 id="PreferNoSchedule does not filter"),
    pytest.param(pod(), info(node(taints=[taint("a", "1", "PreferNoSchedule"), taint("b", "2"), taint("c", "3")])),
                 ["node(s) had untolerated taint {b: 2}"], id="first untolerated taint in spec order"),
    pytest.param(pod(tolerations=[{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}]),
                 info(node(taints=[taint("dedicated", "db")])), [], id="tolerated"),
    pytest.param(pod(tolerations=[{"key": "dedicated", "operator": "Exists"}], containers=[container(cpu="8")]),
                 info(node(taints=[taint("dedicated", "db")])), ["Insufficient cpu"], id="tolerated, then resources"),
    pytest.param(pod(containers=[container(cpu="8")]), info(node(taints=[taint("dedicated", "db")])), [UNTOLERATED],
                 id="first failing filter wins: taint, not cpu"),
    # NodeUnschedulable and NodeName come first
    pytest.param(pod(), info(node(unschedulable=True, taints=[taint("dedicated", "db")])),
                 ["node(s) were unschedulable"], id="unschedulable before taints"),
    pytest.param(pod(tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
                                   "effect": "NoSchedule"}]), info(node(unschedulable=True)), [],
                 id="tolerating the unschedulable taint"),
    pytest.param(pod(node_name="n2"), info(node()), ["node(s) didn't match the requested node name"],
                 id="node name"),
    pytest.param(pod(node_name="n1"), info(node()), [], id="node name matches"),
    # NodeAffinity
    pytest.param(pod(nodeSelector={"zone": "a"}), info(ZONE_A), [], id="nodeSelector matches"),
    pytest.param(pod(nodeSelector={"zone": "b"}), info(ZONE_A), ["node(s) didn't match Pod's node affinity/selector"],
                 id="nodeSelector other value"),
    pytest.param(pod(nodeSelector={"zone": "a", "disk": "ssd"}), info(ZONE_A),
                 ["node(s) didn't match Pod's node affinity/selector"], id="nodeSelector needs every label"),
    pytest.param(pod(affinity=required_affinity({"matchExpressions": [expr("zone", "In", "a", "b")]})), info(ZONE_A),
                 [], id="In"),
    pytest.param(pod(affinity=required_affinity({"matchExpressions": [expr("zone", "NotIn", "a")]})), info(ZONE_A),
                 ["node(s) didn't match Pod's node affinity/selector"], id="NotIn"),
    pytest.param(pod(affinity=required_affinity({"matchExpressions": [expr("zone", "Exists")]})), info(ZONE_A), [],
                 id="Exists"),
    pytest.param(pod(affinity=required_affinity({"matchExpressions": [expr("zone", "DoesNotExist")]})), info(ZONE_A),
                 ["node(s) didn't match Pod's node affinity/selector"], id="DoesNotExist"),
    pytest.param(pod(affinity=required_affinity({"matchExpressions": [expr("gpus", "Gt", "3")]})), info(ZONE_A), [],
                 id="Gt"),
    pytest.param(pod(affinity=required_affinity({"matchExpressions": [expr("gpus", "Lt", "4")]})), info(ZONE_A),
                 ["node(s) didn't match Pod's node affinity/selector"], id="Lt is strict"),
    pytest.param(pod(affinity=required_affinity({"matchExpressions": [expr("zone", "Gt", "1")]})), info(ZONE_A),
                 ["node(s) didn't match Pod's node affinity/selector"], id="Gt on a non-integer label"),
    # strconv.ParseInt on both sides, as labels.Requirement.Matches: Python's int() would take these.
    pytest.param(pod(affinity=required_affinity({"matchExpressions": [expr("gpus", "Gt", "1_0")]})),
                 info(node(labels={"gpus": "2_000"})), ["node(s) didn't match Pod's node affinity/selector"],
                 id="Gt with underscores in numbers"),
    pytest.param(pod(affinity=required_affinity({"matchExpressions": [expr("gpus", "Lt", " 9")]})), info(ZONE_A),
                 ["node(s) didn't match Pod's node affinity/selector"], id="Lt with a space in the value"),
    pytest.param(pod(affinity=required_affinity({"matchExpressions": [expr("gpus", "Gt", "+3")]})), info(ZONE_A), [],
                 id="Gt with a plus sign"),
    pytest.param(pod(affinity=required_affinity({"matchExpressions": [expr("zone", "In", "b")]},
                                                {"matchExpressions": [expr("zone", "In", "a")]})), info(ZONE_A), [],
                 id="terms are ORed"),
    pytest.param(pod(affinity=required_affinity({"matchExpressions": [expr("zone", "In", "a"),
                                                                      expr("gpus", "In", "8")]})), info(ZONE_A),
                 ["node(s) didn't match Pod's node affinity/selector"], id="expressions are ANDed"),
    pytest.param(pod(affinity=required_affinity({"matchFields": [expr("metadata.name", "In", "n1")]})), info(ZONE_A),
                 [], id="matchFields metadata.name"),
    pytest.param(pod(affinity=required_affinity({"matchFields": [expr("metadata.name", "NotIn", "n1")]})),
                 info(ZONE_A), ["node(s) didn't match Pod's node affinity/selector"], id="matchFields NotIn"),
    pytest.param(pod(affinity=required_affinity({})), info(ZONE_A), ["node(s) didn't match Pod's node affinity/selector"],
                 id="an empty term matches nothing"),
    pytest.param(pod(nodeSelector={"zone": "a"}, affinity=required_affinity({"matchExpressions": [expr("zone", "In",
                                                                                                   "b")]})),
                 info(ZONE_A), ["node(s) didn't match Pod's node affinity/selector"],
                 id="nodeSelector and affinity must both hold"),
    # NodePorts, against the pods the cache has on the node
    pytest.param(pod(containers=[container(ports=HOST_80)]), info(node(), pod("web", containers=[container(ports=HOST_80)])),
                 ["node(s) didn't have free ports for the requested pod ports"], id="host port taken"),
    pytest.param(pod(containers=[container(ports=[{"containerPort": 80, "hostPort": 80, "protocol": "UDP"}])]),
                 info(node(), pod("web", containers=[container(ports=HOST_80)])), [], id="same port, other protocol"),
    pytest.param(pod(containers=[container(ports=[{"containerPort": 80, "hostPort": 80, "hostIP": "10.0.0.1"}])]),
                 info(node(), pod("web", containers=[container(ports=[{"containerPort": 80, "hostPort": 80,
                                                                       "hostIP": "10.0.0.2"}])])),
                 [], id="same port, other host IP"),
    pytest.param(pod(containers=[container(ports=[{"containerPort": 80, "hostPort": 80, "hostIP": "10.0.0.1"}])]),
                 info(node(), pod("web", containers=[container(ports=HOST_80)])),
                 ["node(s) didn't have free ports for the requested pod ports"], id="0.0.0.0 covers every host IP"),
    pytest.param(pod(containers=[container(ports=[{"containerPort": 80}])]),
                 info(node(), pod("web", containers=[container(ports=[{"containerPort": 80}])])), [],
                 id="container ports without hostPort never clash"),
])
def test_fits(p: Pod, where: NodeInfo, reasons: list[str]) -> None:
    assert fits(p, where) == reasons


@pytest.mark.parametrize(("toleration", "taint_", "matches"), [
    pytest.param({"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"},
                 {"key": "k", "value": "v", "effect": "NoSchedule"}, True, id="equal"),
    pytest.param({"key": "k", "value": "v", "effect": "NoSchedule"},
                 {"key": "k", "value": "v", "effect": "NoSchedule"}, True, id="operator defaults to Equal"),
    pytest.param({"key": "k", "operator": "Equal", "value": "w", "effect": "NoSchedule"},
                 {"key": "k", "value": "v", "effect": "NoSchedule"}, False, id="other value"),
    pytest.param({"key": "k", "operator": "Exists"}, {"key": "k", "value": "v", "effect": "NoExecute"}, True,
                 id="Exists with empty effect matches any effect"),
    pytest.param({"key": "k", "operator": "Exists", "effect": "NoExecute"}, {"key": "k", "effect": "NoSchedule"},
                 False, id="other effect"),
    pytest.param({"operator": "Exists"}, {"key": "anything", "value": "x", "effect": "NoSchedule"}, True,
                 id="Exists without key matches every taint"),
    pytest.param({"key": "j", "operator": "Exists"}, {"key": "k", "effect": "NoSchedule"}, False, id="other key"),
    pytest.param({"key": "k", "operator": "Equal"}, {"key": "k", "effect": "NoSchedule"}, True,
                 id="Equal with empty values"),
    pytest.param({"key": "k", "operator": "Bogus"}, {"key": "k", "effect": "NoSchedule"}, False,
                 id="unknown operator"),
])
def test_toleration_matches(toleration: dict[str, str], taint_: dict[str, str], matches: bool) -> None:
    assert toleration_matches(Toleration.from_dict(toleration), Taint.from_dict(taint_)) is matches


# --- the FailedScheduling message ----------------------------------------------------------------

@pytest.mark.parametrize(("total", "reasons", "message"), [
    pytest.param(3, {"n1": ["Insufficient cpu"], "n2": ["node(s) had untolerated taint {dedicated: db}"],
                     "n3": ["node(s) had untolerated taint {dedicated: db}"]},
                 "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {dedicated: db}.",
                 id="reference example"),
    pytest.param(1, {"n1": ["Too many pods"]}, "0/1 nodes are available: 1 Too many pods.", id="one node"),
    pytest.param(2, {"n1": ["Insufficient cpu", "Insufficient memory"], "n2": ["Insufficient memory"]},
                 "0/2 nodes are available: 1 Insufficient cpu, 2 Insufficient memory.",
                 id="every reason of a node counts"),
    pytest.param(12, {**{f"a{i}": ["Insufficient cpu"] for i in range(10)},
                      "b1": ["Insufficient memory"], "b2": ["Insufficient memory"]},
                 "0/12 nodes are available: 10 Insufficient cpu, 2 Insufficient memory.",
                 id="sorted as strings: 10 before 2"),
    pytest.param(2, {"n1": ["node(s) were unschedulable"], "n2": ["Insufficient cpu"]},
                 "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable.",
                 id="upper case sorts before lower case"),
    pytest.param(0, {}, "no nodes available to schedule pods", id="no nodes"),
])
def test_failure_message(total: int, reasons: dict[str, list[str]], message: str) -> None:
    assert failure_message(total, reasons) == message


def test_decide_reports_every_node() -> None:
    nodes = [info(node("n1", cpu="1")), info(node("n2", taints=[taint("dedicated", "db")])),
             info(node("n3", taints=[taint("dedicated", "db")]))]
    decision = decide(pod(containers=[container(cpu="2")]), nodes)
    assert decision.node is None
    assert decision.reasons == {"n1": ["Insufficient cpu"], "n2": [UNTOLERATED], "n3": [UNTOLERATED]}
    assert decision.message == ("0/3 nodes are available: 1 Insufficient cpu, "
                                "2 node(s) had untolerated taint {dedicated: db}.")


def test_decide_without_nodes() -> None:
    assert decide(pod(), []).message == "no nodes available to schedule pods"


# --- assume / forget -----------------------------------------------------------------------------

def bound(p: Pod, node_name: str = "n1", phase: str = "Running") -> Pod:
    assert p.spec is not None and p.status is not None
    return p.model_copy(update={"spec": p.spec.model_copy(update={"node_name": node_name}),
                                "status": p.status.model_copy(update={"phase": phase})})


def usage(cache: Cache, name: str = "n1") -> tuple[int, int, int, int, set[str]]:
    n = cache.nodes[name]
    return n.requested.milli_cpu, n.requested.memory, n.requested.pods, n.nonzero_cpu, n.pods


WEB = pod("web", containers=[container(cpu="1", memory="1Gi")])
API = pod("api", containers=[container()])


def test_assume_counts_at_once_and_forget_undoes_it() -> None:
    cache = Cache()
    cache.set_node(node())
    cache.assume(WEB, "n1")
    assert usage(cache) == (1000, GI, 1, 1000, {"default/web"})
    assert cache.is_assumed_or_bound("default/web")
    cache.forget("default/web")
    assert usage(cache) == (0, 0, 0, 0, set())
    assert not cache.is_assumed_or_bound("default/web")


def test_assumed_pod_is_kept_until_the_binding_shows_up() -> None:
    cache = Cache()
    cache.set_node(node())
    cache.assume(WEB, "n1")
    cache.set_pod(WEB)  # an informer update from before the binding: still unbound
    assert usage(cache) == (1000, GI, 1, 1000, {"default/web"})
    cache.set_pod(bound(WEB))  # the binding arrives: confirmed, counted once
    assert usage(cache) == (1000, GI, 1, 1000, {"default/web"})
    cache.forget("default/web")  # a confirmed pod is not forgotten
    assert usage(cache) == (1000, GI, 1, 1000, {"default/web"})


def test_bound_pods_count_until_terminal_or_deleted() -> None:
    cache = Cache()
    cache.set_node(node())
    cache.set_pod(bound(WEB))
    cache.set_pod(bound(API))
    assert usage(cache) == (1000, GI, 2, 1100, {"default/web", "default/api"})
    cache.set_pod(bound(WEB, phase="Succeeded"))
    assert usage(cache) == (0, 0, 1, 100, {"default/api"})
    cache.remove_pod("default/api")
    assert usage(cache) == (0, 0, 0, 0, set())


def test_pod_moving_nodes_is_counted_on_the_new_one() -> None:
    cache = Cache()
    cache.set_node(node("n1"))
    cache.set_node(node("n2"))
    cache.assume(WEB, "n1")
    cache.set_pod(bound(WEB, "n2"))
    assert usage(cache, "n1") == (0, 0, 0, 0, set())
    assert usage(cache, "n2") == (1000, GI, 1, 1000, {"default/web"})


def test_node_seen_after_its_pods_counts_them() -> None:
    cache = Cache()
    cache.set_pod(bound(WEB))
    cache.set_node(node())
    assert usage(cache) == (1000, GI, 1, 1000, {"default/web"})
    cache.set_node(node(cpu="8"))  # an update keeps the accounting, refreshes allocatable
    assert usage(cache) == (1000, GI, 1, 1000, {"default/web"})
    assert cache.nodes["n1"].allocatable.milli_cpu == 8000


def test_assumed_pod_blocks_the_next_decision() -> None:
    cache = Cache()
    cache.set_node(node(cpu="1", pods="10"))
    first = decide(WEB, list(cache.nodes.values()))
    assert first.node == "n1"
    cache.assume(WEB, "n1")
    second = decide(pod("web2", containers=[container(cpu="1")]), list(cache.nodes.values()))
    assert second.message == "0/1 nodes are available: 1 Insufficient cpu."
    cache.forget("default/web")
    assert decide(pod("web2", containers=[container(cpu="1")]), list(cache.nodes.values())).node == "n1"


def test_assumed_host_port_is_taken_until_forgotten() -> None:
    cache = Cache()
    cache.set_node(node())
    first = pod("a", containers=[container(ports=HOST_80)])
    second = pod("b", containers=[container(ports=HOST_80)])
    cache.assume(first, "n1")
    assert fits(second, cache.nodes["n1"]) == ["node(s) didn't have free ports for the requested pod ports"]
    cache.forget("default/a")
    assert fits(second, cache.nodes["n1"]) == []


# --- node readiness, PreFilter, sampling ---------------------------------------------------------

def with_conditions(n: Node, ready: str | None) -> Node:
    data = n.to_dict()
    data["status"]["conditions"] = [{"type": "Ready", "status": ready}] if ready is not None else []
    return Node.from_dict(data)


@pytest.mark.parametrize(("n", "reasons"), [
    pytest.param(with_conditions(node(), None), [], id="never posted a Ready condition, no taint yet"),
    pytest.param(with_conditions(node(), "False"), [], id="Ready=False before the controller taints it"),
    pytest.param(with_conditions(node(taints=[taint("node.kubernetes.io/not-ready")]), "False"),
                 ["node(s) had untolerated taint {node.kubernetes.io/not-ready: }"],
                 id="the lifecycle controller's not-ready taint"),
    pytest.param(with_conditions(node(taints=[taint("node.kubernetes.io/unreachable", effect="NoExecute")]), "Unknown"),
                 ["node(s) had untolerated taint {node.kubernetes.io/unreachable: }"],
                 id="unreachable NoExecute without the default toleration"),
])
def test_readiness_is_read_from_taints_only(n: Node, reasons: list[str]) -> None:
    assert fits(pod(), info(n)) == reasons


def pinned(*names: str) -> dict[str, Any]:
    return required_affinity(*({"matchFields": [expr("metadata.name", "In", name)]} for name in names))


def test_prefilter_narrows_to_pinned_nodes() -> None:
    nodes = [info(node(f"n{i}", cpu="1")) for i in range(1, 5)]
    decision = decide(pod(containers=[container(cpu="2")], affinity=pinned("n2", "n9")), nodes)
    # n2 is evaluated and short of cpu; the other three never are; n9 does not exist.
    assert decision.reasons == {"n2": ["Insufficient cpu"]}
    assert decision.message == ("0/4 nodes are available: 1 Insufficient cpu, "
                                "3 node(s) didn't satisfy plugin(s) [NodeAffinity].")
    assert decide(pod(affinity=pinned("n3")), nodes).node == "n3"


def test_prefilter_conflicting_pins() -> None:
    term = {"matchFields": [expr("metadata.name", "In", "n1"), expr("metadata.name", "In", "n2")]}
    decision = decide(pod(affinity=required_affinity(term)), [info(node("n1")), info(node("n2"))])
    assert decision.node is None
    assert decision.message == "0/2 nodes are available: pod affinity terms conflict."
    assert decision.unschedulable_plugins == frozenset()


def test_a_term_without_pins_keeps_every_node() -> None:
    affinity = required_affinity({"matchFields": [expr("metadata.name", "In", "n1")]},
                                 {"matchExpressions": [expr("zone", "In", "a")]})
    nodes = [info(node("n1")), info(node("n2", labels={"zone": "a"})), info(node("n3"))]
    decision = decide(pod(affinity=affinity), nodes, rng=random.Random(3))
    assert decision.reasons == {"n3": ["node(s) didn't match Pod's node affinity/selector"]}
    assert decision.plugins == {"n3": "NodeAffinity"}


@pytest.mark.parametrize(("nodes", "percentage", "wanted"), [
    pytest.param(50, 0, 50, id="under 100 nodes: all"),
    pytest.param(100, 0, 100, id="100 nodes: 49% but at least 100"),
    pytest.param(500, 0, 230, id="500 nodes: 46%"),
    pytest.param(1000, 0, 420, id="1000 nodes: 42%"),
    pytest.param(5000, 0, 500, id="5000 nodes: 10%"),
    pytest.param(6000, 0, 300, id="6000 nodes: 2% is raised to 5%"),
    pytest.param(5000, 1, 100, id="configured 1%: floor of 100"),
    pytest.param(5000, 100, 5000, id="configured 100%"),
])
def test_num_feasible_nodes_to_find(nodes: int, percentage: int, wanted: int) -> None:
    assert num_feasible_nodes_to_find(nodes, percentage) == wanted


def test_sampling_starts_where_the_last_decision_stopped() -> None:
    nodes = [info(node(f"n{i:03}")) for i in range(500)]
    first = decide(pod(), nodes, start=0)
    assert len(first.scores) == 230 and first.next_start == 230
    assert set(first.scores) == {f"n{i:03}" for i in range(230)}
    second = decide(pod(), nodes, start=first.next_start)
    assert second.next_start == 460
    assert set(second.scores) == {f"n{i:03}" for i in range(230, 460)}
    third = decide(pod(), nodes, start=second.next_start)  # wraps around
    assert set(third.scores) == {f"n{i:03}" for i in (*range(460, 500), *range(190))}


def test_rejected_nodes_count_as_processed() -> None:
    nodes = [info(node(f"n{i:03}", cpu="1" if i < 10 else "4")) for i in range(200)]
    decision = decide(pod(containers=[container(cpu="2")]), nodes, start=0)
    # 200 nodes -> 48% -> 96 -> at least 100 feasible; the 10 small ones were looked at too.
    assert len(decision.reasons) == 10 and len(decision.scores) == 100
    assert decision.next_start == 110


@pytest.mark.parametrize(("message", "expected"), [
    pytest.param("x" * 1024, "x" * 1024, id="exactly 1024 bytes: kept"),
    pytest.param("x" * 1025, "x" * 1020 + " ...", id="one byte over: tail replaced"),
    pytest.param("é" * 600, "é" * 510 + " ...", id="counted in bytes, not characters"),
])
def test_event_note_truncation(message: str, expected: str) -> None:
    assert truncate_note(message) == expected
    assert len(truncate_note(message).encode()) <= 1024
