"""Whether a pod may run on a node by its nodeSelector, required node affinity and tolerations: kube's
component-helpers/scheduling/corev1, which kube-scheduler and the DaemonSet controller both use.

Pure functions over the models, shared by the scheduler (scheduler/fit.py pre-computes a pod's terms once
per scheduling cycle and calls these) and the controllers.
"""

from __future__ import annotations

from typing import Any

from kubelab.models import Node, PodSpec, Taint, Toleration
from kubelab.selectors import parse_int64


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


def untolerated_taints(taints: list[Taint] | None, tolerations: list[Toleration] | None,
                       effects: tuple[str, ...]) -> list[Taint]:
    """The node's taints with one of `effects` that no toleration matches, in spec order."""
    return [t for t in taints or [] if t.effect in effects
            and not any(toleration_matches(tol, t) for tol in tolerations or [])]


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
        # labels.Requirement.Matches: both sides through strconv.ParseInt, so " 5" and "1_000" match nothing.
        have = parse_int64(labels[key]) if key in labels else None
        want = parse_int64(values[0]) if len(values) == 1 else None
        if have is None or want is None:
            return False
        return have > want if op == "Gt" else have < want
    return False


def term_matches(term: dict[str, Any], labels: dict[str, str], name: str) -> bool:
    """A NodeSelectorTerm: its expressions ANDed; matchFields knows only metadata.name; empty matches nothing."""
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False
    if not all(_match_expression(e, labels) for e in exprs):
        return False
    return all(_match_expression(f, {"metadata.name": name}) for f in fields)


def required_terms(spec: PodSpec | None) -> list[dict[str, Any]] | None:
    affinity = (spec.affinity if spec else None) or {}
    required = (affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if not required:
        return None
    terms: list[dict[str, Any]] = required.get("nodeSelectorTerms") or []
    return terms


def matches_node(spec: PodSpec | None, node: Node) -> bool:
    """GetRequiredNodeAffinity(pod).Match(node): every nodeSelector pair is a node label, and one of the
    required node affinity terms (ORed) matches."""
    labels = node.metadata.labels or {}
    for key, value in ((spec.node_selector if spec else None) or {}).items():
        if labels.get(key) != value:
            return False
    terms = required_terms(spec)
    if terms is not None:
        return any(term_matches(t, labels, node.metadata.name or "") for t in terms)
    return True


def pinned_node_name(spec: PodSpec | None) -> str | None:
    """The node a pod is pinned to by a required `metadata.name In [one node]` term, as DaemonSet pods are
    (util.GetTargetNodeName reads it before the pod is bound)."""
    for term in required_terms(spec) or []:
        for field in term.get("matchFields") or []:
            values = field.get("values") or []
            if field.get("key") == "metadata.name" and field.get("operator") == "In" and len(values) == 1:
                return str(values[0])
    return None
