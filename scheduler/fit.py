"""Filters: can this pod run on this node? Pure functions returning kube-scheduler's reasons.

Filters run in kube-scheduler's order (NodeUnschedulable, NodeName, TaintToleration, NodeAffinity,
NodePorts, NodeResourcesFit) and a node's verdict is the first filter that fails, with all of that
filter's reasons — so one node can be "Insufficient cpu" and "Insufficient memory" at once, but never
both tainted and short of cpu. No clock, no I/O, no globals.

`PodContext` is what kube-scheduler's PreFilter step computes once per scheduling cycle (the pod's
requests, its relevant tolerations, its parsed affinity): `filter_node()` then costs a handful of
comparisons per node, which is what lets a decision look at hundreds of nodes.
"""

from __future__ import annotations

from typing import Any

from kubelab.models import Pod, Taint, Toleration
from kubelab.nodeaffinity import required_terms, term_matches, toleration_matches

from .cache import NodeInfo, host_ports
from .resources import Resources, pod_nonzero_requests, pod_requests

# Plugin names, as they appear in kube-scheduler's configuration and logs.
NODE_UNSCHEDULABLE_PLUGIN = "NodeUnschedulable"
NODE_NAME_PLUGIN = "NodeName"
TAINT_TOLERATION_PLUGIN = "TaintToleration"
NODE_AFFINITY_PLUGIN = "NodeAffinity"
NODE_PORTS_PLUGIN = "NodePorts"
NODE_RESOURCES_FIT_PLUGIN = "NodeResourcesFit"

UNSCHEDULABLE = "node(s) were unschedulable"
NODE_NAME = "node(s) didn't match the requested node name"
NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
NODE_PORTS = "node(s) didn't have free ports for the requested pod ports"
TOO_MANY_PODS = "Too many pods"
# NodeAffinity's PreFilter: every required term pins metadata.name, and the pins do not intersect.
AFFINITY_CONFLICT = "pod affinity terms conflict"
NO_NODES = "no nodes available to schedule pods"
UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")


def _first_untolerated(taints: tuple[Taint, ...] | list[Taint], tolerations: list[Toleration]) -> Taint | None:
    for taint in taints:
        if not any(toleration_matches(t, taint) for t in tolerations):
            return taint
    return None


def taint_reason(taint: Taint) -> str:
    # An empty value still gets its ": " — `{node.kubernetes.io/not-ready: }`, as Go's %v prints it.
    return f"node(s) had untolerated taint {{{taint.key}: {taint.value or ''}}}"


def preferred_terms(pod: Pod) -> list[tuple[int, dict[str, Any]]]:
    """(weight, preference) of the pod's preferred node affinity; weight-0 terms never count."""
    affinity = (pod.spec.affinity if pod.spec else None) or {}
    preferred = (affinity.get("nodeAffinity") or {}).get("preferredDuringSchedulingIgnoredDuringExecution") or []
    return [(int(p.get("weight") or 0), p.get("preference") or {}) for p in preferred if p.get("weight")]


def pinned_node_names(pod: Pod) -> frozenset[str] | None:
    """NodeAffinity's PreFilterResult: when every required term pins `metadata.name In [...]` (how
    DaemonSet pods are placed), only those nodes need to be looked at. None means every node."""
    terms = required_terms(pod.spec)
    if not terms:
        return None
    names: set[str] = set()
    for term in terms:
        term_names: set[str] | None = None
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("operator") == "In":
                values = set(field.get("values") or [])
                term_names = values if term_names is None else term_names & values
        if term_names is None:
            return None  # this term allows any node, and terms are ORed
        names |= term_names
    return frozenset(names)


def port_conflicts(wanted: frozenset[tuple[str, str, int]], used: set[tuple[str, str, int]] | Any) -> bool:
    """HostPortInfo.CheckConflict: 0.0.0.0 on either side clashes with any IP on the same protocol/port;
    otherwise only the same IP does."""
    for proto, ip, port in wanted:
        for uproto, uip, uport in used:
            if proto == uproto and port == uport and (ip == uip or "0.0.0.0" in (ip, uip)):
                return True
    return False


def insufficient_resources(request: Resources, info: NodeInfo) -> list[str]:
    """NodeResourcesFit: pods first (even for pods that request nothing), then each short resource."""
    reasons = []
    alloc, used = info.allocatable, info.requested
    if used.pods + 1 > alloc.pods:
        reasons.append(TOO_MANY_PODS)
    if request.is_zero():
        return reasons
    if request.milli_cpu > 0 and request.milli_cpu > alloc.milli_cpu - used.milli_cpu:
        reasons.append("Insufficient cpu")
    if request.memory > 0 and request.memory > alloc.memory - used.memory:
        reasons.append("Insufficient memory")
    if request.ephemeral_storage > 0 and request.ephemeral_storage > alloc.ephemeral_storage - used.ephemeral_storage:
        reasons.append("Insufficient ephemeral-storage")
    for name, value in sorted(request.scalar.items()):
        if value > 0 and value > alloc.scalar.get(name, 0) - used.scalar.get(name, 0):
            reasons.append(f"Insufficient {name}")
    return reasons


class PodContext:
    """Everything the filters and scores need from one pod, computed once per scheduling cycle."""

    __slots__ = (
        "host_ports",
        "node_name",
        "node_selector",
        "nonzero",
        "pinned",
        "pod",
        "preferred",
        "request",
        "required_terms",
        "tolerates_unschedulable",
        "tolerations",
    )

    def __init__(self, pod: Pod) -> None:
        spec = pod.spec
        self.pod = pod
        self.request = pod_requests(pod)
        self.nonzero = pod_nonzero_requests(pod)
        self.tolerations: list[Toleration] = list((spec.tolerations if spec else None) or [])
        self.tolerates_unschedulable = any(toleration_matches(t, UNSCHEDULABLE_TAINT) for t in self.tolerations)
        self.node_name = (spec.node_name if spec else None) or ""
        self.node_selector = (spec.node_selector if spec else None) or {}
        self.required_terms = required_terms(spec)
        self.preferred = preferred_terms(pod)
        self.host_ports = host_ports(pod)
        self.pinned = pinned_node_names(pod)


def filter_node(ctx: PodContext, info: NodeInfo) -> tuple[str, list[str]] | None:
    """Run the filters in order on one node: None if the pod fits, else (plugin, reasons) of the
    first filter that rejects it (RunFilterPlugins stops at the first non-success)."""
    if info.unschedulable and not ctx.tolerates_unschedulable:
        return NODE_UNSCHEDULABLE_PLUGIN, [UNSCHEDULABLE]
    if ctx.node_name and ctx.node_name != info.name:
        return NODE_NAME_PLUGIN, [NODE_NAME]
    if info.filter_taints:
        taint = _first_untolerated(info.filter_taints, ctx.tolerations)
        if taint is not None:
            return TAINT_TOLERATION_PLUGIN, [taint_reason(taint)]
    if ctx.node_selector or ctx.required_terms is not None:
        labels = info.labels
        if any(labels.get(k) != v for k, v in ctx.node_selector.items()) or (
                ctx.required_terms is not None
                and not any(term_matches(t, labels, info.name) for t in ctx.required_terms)):
            return NODE_AFFINITY_PLUGIN, [NODE_AFFINITY]
    if ctx.host_ports and port_conflicts(ctx.host_ports, info.used_ports):
        return NODE_PORTS_PLUGIN, [NODE_PORTS]
    # NodeResourcesFit, with the common case (cpu and memory only) spelled out for speed; the general
    # function below gives the same answer.
    request, alloc, used = ctx.request, info.allocatable, info.requested
    if (used.pods < alloc.pods and request.milli_cpu <= alloc.milli_cpu - used.milli_cpu
            and request.memory <= alloc.memory - used.memory and not request.ephemeral_storage
            and not request.scalar):
        return None
    reasons = insufficient_resources(request, info)
    return (NODE_RESOURCES_FIT_PLUGIN, reasons) if reasons else None


def fits(pod: Pod, info: NodeInfo, *, request: Resources | None = None) -> list[str]:
    """The reasons `pod` cannot run on `info`'s node; empty when it fits."""
    ctx = PodContext(pod)
    if request is not None:
        ctx.request = request
    verdict = filter_node(ctx, info)
    return verdict[1] if verdict is not None else []


def failure_message(total_nodes: int, reasons_by_node: dict[str, list[str]], *,
                    absent_reason: str | None = None, prefilter_message: str | None = None) -> str:
    """FitError.Error(): `0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {...}.`

    Each reason is counted over nodes, entries are `<count> <reason>` sorted as plain strings (so "10 x"
    sorts before "2 y", as in Go) and joined with ", ". Nodes a PreFilter left out count under
    `absent_reason`; a PreFilter rejection replaces the whole list with its own message.
    """
    if total_nodes == 0:
        return NO_NODES
    if prefilter_message:
        return f"0/{total_nodes} nodes are available: {prefilter_message}."
    counts: dict[str, int] = {}
    for reasons in reasons_by_node.values():
        for reason in reasons:
            counts[reason] = counts.get(reason, 0) + 1
    if absent_reason and len(reasons_by_node) < total_nodes:
        counts[absent_reason] = counts.get(absent_reason, 0) + total_nodes - len(reasons_by_node)
    entries = sorted(f"{n} {reason}" for reason, n in counts.items())
    return f"0/{total_nodes} nodes are available: {', '.join(entries)}."


def truncate_note(message: str, limit: int = 1024) -> str:
    """schedule_one.go truncateMessage: an event note is at most 1024 bytes, the tail replaced by ` ...`."""
    data = message.encode()
    if len(data) <= limit:
        return message
    return data[:limit - 4].decode(errors="ignore") + " ..."
