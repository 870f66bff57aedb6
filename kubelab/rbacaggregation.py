"""ClusterRole aggregation, pure: the rules an aggregated ClusterRole (one with an aggregationRule) is to
hold, gathered from the ClusterRoles its selectors pick, as kube-controller-manager's
clusterrole-aggregation controller (pkg/controller/clusterroleaggregation) gathers them: selector by
selector, the matching roles in name order (never the role itself), each rule once, in the order met.

Both the controller (controllers/clusterroleaggregation.py) and the API server's bootstrap policy (which
writes admin, edit and view already aggregated) use it; it works on ClusterRoles as JSON.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .models import LabelSelector
from .selectors import SelectorError, selector_from_label_selector


def aggregated_rules(role: Mapping[str, Any], roles: Iterable[Mapping[str, Any]]) -> list[Any] | None:
    """The rules `role` aggregates from `roles`, or None when it has no aggregationRule (not aggregated). A
    selector that does not parse picks nothing."""
    aggregation = role.get("aggregationRule")
    if not isinstance(aggregation, Mapping):
        return None
    name = (role.get("metadata") or {}).get("name")
    ordered = sorted(roles, key=lambda r: str((r.get("metadata") or {}).get("name") or ""))
    rules: list[Any] = []
    for raw in aggregation.get("clusterRoleSelectors") or []:
        try:
            selector = selector_from_label_selector(LabelSelector.model_validate(raw))
        except (SelectorError, ValueError):
            continue
        for other in ordered:
            meta = other.get("metadata") or {}
            if meta.get("name") == name or not selector.matches(meta.get("labels") or {}):
                continue
            rules += [rule for rule in other.get("rules") or [] if rule not in rules]
    return rules


__all__ = ["aggregated_rules"]
