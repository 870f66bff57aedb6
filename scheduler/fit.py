"""Filters: can this pod run on this node? Pure functions returning kube-scheduler's reasons.

Filters run in kube-scheduler's order (NodeUnschedulable, NodeName, TaintToleration, NodeAffinity,
NodePorts, NodeResourcesFit) and a node's verdict is the first filter that fails, with all of that
filter's reasons — so one node can be "Insufficient cpu" and "Insufficient memory" at once, but never
both tainted and short of cpu. No clock, no I/O, no globals.
"""

from __future__ import annotations

from typing import Any

from kubelab.models import Node, Pod, Taint, Toleration

from .cache import NodeInfo, host_ports
from .resources import Resources, pod_requests

UNSCHEDULABLE = "node(s) were unschedulable"
NODE_NAME = "node(s) didn't match the requested node name"
NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
NODE_PORTS = "node(s) didn't have free ports for the requested pod ports"
TOO_MANY_PODS = "Too many pods"


def toleration_matches(toleration: Toleration, taint: Taint) -> bool:
    """v1.Toleration.ToleratesTaint: an empty effect matches every effect; Exists with no key matches all."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    operator = toleration.operator or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.value or "") == (taint.value or "")
    return False


def untolerated_taint(pod: Pod, node: Node) -> Taint | None:
    tolerations = (pod.spec.tolerations if pod.spec else None) or []
    for taint in (node.spec.taints if node.spec else None) or []:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(toleration_matches(t, taint) for t in tolerations):
            return taint
    return None


def _match_expression(expr: dict[str, Any], labels: dict[str, str]) -> bool:
    key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt"):
        try:
            have, want = int(labels[key]), int(values[0])
        except (KeyError, ValueError, IndexError):
            return False
        return have > want if op == "Gt" else have < want
    return False


def _term_matches(term: dict[str, Any], node: Node) -> bool:
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False  # an empty term matches nothing
    labels = node.metadata.labels or {}
    if not all(_match_expression(e, labels) for e in exprs):
        return False
    return all(_match_expression(f, {"metadata.name": node.metadata.name or ""}) for f in fields)


def matches_node_affinity(pod: Pod, node: Node) -> bool:
    spec = pod.spec
    if spec is None:
        return True
    labels = node.metadata.labels or {}
    for key, value in (spec.node_selector or {}).items():
        if labels.get(key) != value:
            return False
    required = (((spec.affinity or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if required:
        terms = required.get("nodeSelectorTerms") or []
        return any(_term_matches(t, node) for t in terms)
    return True


def port_conflicts(wanted: frozenset[tuple[str, str, int]], used: set[tuple[str, str, int]]) -> bool:
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


def fits(pod: Pod, info: NodeInfo, *, request: Resources | None = None,
         used_host_ports: set[tuple[str, str, int]] | None = None) -> list[str]:
    """The reasons `pod` cannot run on `info`'s node; empty when it fits.

    Host ports are checked against the node's bound and assumed pods (`info.used_ports`) unless the
    caller passes `used_host_ports` itself.
    """
    node = info.node
    spec = pod.spec
    if node.spec and node.spec.unschedulable:
        unschedulable_taint = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")
        if not any(toleration_matches(t, unschedulable_taint) for t in (spec.tolerations if spec else None) or []):
            return [UNSCHEDULABLE]
    if spec and spec.node_name and spec.node_name != node.metadata.name:
        return [NODE_NAME]
    taint = untolerated_taint(pod, node)
    if taint is not None:
        return [f"node(s) had untolerated taint {{{taint.key}: {taint.value or ''}}}"]
    if not matches_node_affinity(pod, node):
        return [NODE_AFFINITY]
    used = used_host_ports if used_host_ports is not None else set(info.used_ports)
    if port_conflicts(host_ports(pod), used):
        return [NODE_PORTS]
    return insufficient_resources(request if request is not None else pod_requests(pod), info)


def failure_message(total_nodes: int, reasons_by_node: dict[str, list[str]]) -> str:
    """FitError.Error(): `0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {...}.`

    Each reason is counted over nodes, entries are `<count> <reason>` sorted as plain strings (so "10 x"
    sorts before "2 y", as in Go) and joined with ", ".
    """
    if total_nodes == 0:
        return "no nodes available to schedule pods"
    counts: dict[str, int] = {}
    for reasons in reasons_by_node.values():
        for reason in reasons:
            counts[reason] = counts.get(reason, 0) + 1
    entries = sorted(f"{n} {reason}" for reason, n in counts.items())
    return f"0/{total_nodes} nodes are available: {', '.join(entries)}."
