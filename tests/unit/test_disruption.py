"""The disruption controller's and the eviction's pure decisions: a budget's numbers from its pods, and
taking one disruption from it (kube's checkAndDecrement)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from apiserver import errors
from apiserver.routers.eviction import budgets_for, take_disruption
from controllers.disruption import compute, selected_pods
from kubelab import timeutil
from kubelab.models import Pod, PodDisruptionBudget

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def pod(name: str, *, ready: bool = True, deleting: bool = False, labels: dict[str, str] | None = None) -> Pod:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "labels": labels or {"app": "web"}}
    if deleting:
        meta["deletionTimestamp"] = timeutil.rfc3339(NOW)
    return Pod.model_validate({"metadata": meta, "status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True" if ready else "False"}]}})


def budget(spec: dict[str, Any], disrupted: dict[str, str] | None = None) -> PodDisruptionBudget:
    return PodDisruptionBudget.model_validate({
        "metadata": {"name": "web", "namespace": "ns", "generation": 1},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec},
        "status": {"disruptedPods": disrupted or {}}})


@pytest.mark.parametrize(("spec", "pods", "scale", "want"), [
    ({"minAvailable": 2}, [pod("a"), pod("b"), pod("c")], None, (3, 2, 3, 1)),
    ({"minAvailable": 3}, [pod("a"), pod("b"), pod("c", ready=False)], None, (3, 3, 2, 0)),
    ({"minAvailable": 1}, [pod("a"), pod("b", deleting=True)], None, (2, 1, 1, 0)),
    ({"minAvailable": "50%"}, [pod("a"), pod("b"), pod("c")], 3, (3, 2, 3, 1)),  # 1.5 rounds up
    ({"maxUnavailable": 1}, [pod("a"), pod("b"), pod("c")], 3, (3, 2, 3, 1)),
    ({"maxUnavailable": "34%"}, [pod("a"), pod("b"), pod("c")], 3, (3, 1, 3, 2)),  # 1.02 rounds up to 2
    ({"maxUnavailable": 0}, [pod("a")], 1, (1, 1, 1, 0)),
    ({"minAvailable": 0}, [], None, (0, 0, 0, 0)),  # no pods expected: nothing may go
])
def test_budget_numbers(spec: dict[str, Any], pods: list[Pod], scale: int | None,
                        want: tuple[int, int, int, int]) -> None:
    got = compute(budget(spec), pods, NOW, scale=scale)
    assert (got.expected, got.desired_healthy, got.current_healthy, got.disruptions_allowed) == want


def test_an_evicted_pod_counts_as_gone_for_two_minutes() -> None:
    recent = timeutil.rfc3339(NOW - timedelta(seconds=30))
    stale = timeutil.rfc3339(NOW - timedelta(minutes=3))
    got = compute(budget({"minAvailable": 1}, {"a": recent, "b": stale, "gone": recent}),
                  [pod("a"), pod("b"), pod("c")], NOW, scale=None)
    assert got.disrupted == {"a": recent}  # b expired, gone has no pod any more
    assert (got.current_healthy, got.disruptions_allowed) == (2, 1)
    assert got.recheck_after == pytest.approx(90)


def test_empty_selectors_select_nothing() -> None:
    empty = PodDisruptionBudget.model_validate({"metadata": {"name": "x", "namespace": "ns"},
                                                "spec": {"selector": {}}})
    assert selected_pods(empty, [pod("a")]) == []
    assert budgets_for(pod("a"), [empty]) == []
    assert budgets_for(pod("a"), [budget({})]) != []


def _stored(allowed: int, *, observed: int = 1, generation: int = 1) -> dict[str, Any]:
    return {"metadata": {"name": "web", "namespace": "ns", "generation": generation},
            "status": {"observedGeneration": observed, "disruptionsAllowed": allowed, "desiredHealthy": 2,
                       "currentHealthy": 2 + allowed}}


def test_taking_a_disruption_counts_it_down_and_names_the_pod() -> None:
    taken = take_disruption(_stored(1), "a", "2026-12-01T12:00:00Z")
    assert taken["status"]["disruptionsAllowed"] == 0
    assert taken["status"]["disruptedPods"] == {"a": "2026-12-01T12:00:00Z"}
    assert [(c["type"], c["status"], c["reason"]) for c in taken["status"]["conditions"]] == \
        [("DisruptionAllowed", "False", "InsufficientPods")]


@pytest.mark.parametrize(("stored", "code", "cause"), [
    (_stored(0), 429, "The disruption budget web needs 2 healthy pods and has 2 currently"),
    (_stored(3, observed=1, generation=2), 429, "The disruption budget web is still being processed by the server."),
])
def test_a_spent_or_unprocessed_budget_is_429(stored: dict[str, Any], code: int, cause: str) -> None:
    with pytest.raises(errors.StatusError) as caught:
        take_disruption(stored, "a", "2026-12-01T12:00:00Z")
    assert caught.value.code == code
    assert caught.value.message == "Cannot evict pod as it would violate the pod's disruption budget."
    assert caught.value.details == {"causes": [{"reason": "DisruptionBudget", "message": cause}]} or \
        caught.value.details == {"causes": [{"reason": "DisruptionBudget", "message": cause}], "retryAfterSeconds": 10}
