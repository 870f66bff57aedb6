"""The last-change-trigger-time rule (controllers/triggertime.py), as table tests."""

from __future__ import annotations

from typing import Any

import pytest

from controllers.triggertime import (
    CauseTracker,
    TriggerTimeTracker,
    format_time,
    pod_trigger_time,
    trigger_revision,
)
from kubelab.models import Pod, Service
from kubelab.timeutil import parse

SERVICE = Service.model_validate({"metadata": {"name": "web", "namespace": "default", "resourceVersion": "7",
                                               "creationTimestamp": "2024-05-01T10:00:00Z"}})


def pod(name: str, ready: str | None = None, when: str = "2024-05-01T10:00:05Z", rv: str = "3") -> Pod:
    status: dict[str, Any] = {}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": ready, "lastTransitionTime": when}]
    return Pod.model_validate({"metadata": {"name": name, "namespace": "default", "resourceVersion": rv},
                               "status": status})


def test_first_sync_is_the_services_creation() -> None:
    assert TriggerTimeTracker().compute(SERVICE, [pod("a", "True")]) == parse("2024-05-01T10:00:00Z")


@pytest.mark.parametrize(("before", "after", "expected"), [
    pytest.param([pod("a")], [pod("a")], None, id="nothing changed"),
    pytest.param([pod("a")], [pod("a", "True")], "2024-05-01T10:00:05Z", id="a pod turned ready"),
    pytest.param([pod("a", "False", "2024-05-01T10:00:05Z")], [pod("a", "True", "2024-05-01T10:00:05Z")],
                 "2024-05-01T10:00:05Z", id="ready within the same second"),
    pytest.param([pod("a", "True", "2024-05-01T10:00:05Z"), pod("b")],
                 [pod("a", "True", "2024-05-01T10:00:09Z"), pod("b", "True", "2024-05-01T10:00:07Z")],
                 "2024-05-01T10:00:07Z", id="the earliest of the changed pods"),
    pytest.param([pod("a", "True")], [pod("a", "True")], None, id="unchanged ready pod"),
])
def test_later_syncs_take_the_earliest_changed_pod(before: list[Pod], after: list[Pod], expected: str | None) -> None:
    tracker = TriggerTimeTracker()
    tracker.compute(SERVICE, before)
    assert tracker.compute(SERVICE, after) == (parse(expected) if expected else None)


def test_forgotten_service_starts_over() -> None:
    tracker = TriggerTimeTracker()
    tracker.compute(SERVICE, [])
    tracker.forget("default/web")
    assert tracker.compute(SERVICE, []) == parse("2024-05-01T10:00:00Z")


def test_rfc3339nano_and_helpers() -> None:
    assert format_time(parse("2024-05-01T10:00:05.120000+02:00")) == "2024-05-01T08:00:05.12Z"  # type: ignore[arg-type]
    assert format_time(parse("2024-05-01T10:00:05Z")) == "2024-05-01T10:00:05Z"  # type: ignore[arg-type]
    assert pod_trigger_time(pod("a")) is None
    assert trigger_revision(SERVICE, [pod("a", rv="12"), pod("b", rv="4")]) == 12


def _pod(name: str, rv: int, *, labels: dict[str, str] | None = None, ready: str = "True") -> Pod:
    return Pod.model_validate({"metadata": {"name": name, "namespace": "default", "resourceVersion": str(rv),
                                            "labels": labels or {"app": "web"}},
                               "status": {"podIP": "10.244.1.2", "conditions": [
                                   {"type": "Ready", "status": ready, "lastTransitionTime": "2024-05-01T10:00:05Z"}]}})


def _causes(tracker: CauseTracker, service: Service, pods: list[Pod], present: dict[str, Pod] | None = None,
            ) -> list[tuple[str, int]]:
    found, seen = tracker.causes(service, pods, current=lambda k: (present or {}).get(k))
    tracker.commit("default/web", seen)
    return sorted(found)


P = "/registry/pods/default/"
S = "/registry/services/default/web"


def test_causes_name_only_the_changes_an_endpoint_reflects() -> None:
    tracker = CauseTracker()
    a, b = _pod("a", 10), _pod("b", 11)
    assert _causes(tracker, SERVICE, [a, b]) == [(P + "a", 10), (P + "b", 11), (S, 7)]  # the first sync: all
    assert _causes(tracker, SERVICE, [_pod("a", 12, labels={"app": "web", "tier": "x"}), b]) == []  # a label
    annotated = SERVICE.model_copy(deep=True)
    annotated.metadata.resource_version, annotated.metadata.annotations = "13", {"note": "x"}
    assert _causes(tracker, annotated, [a, b]) == []  # an annotation of the Service
    assert _causes(tracker, annotated, [a, _pod("b", 14, ready="False")]) == [(P + "b", 14)]
    # Relabelled out of the selector (the informer still has it, at 15), and deleted (at 16).
    assert _causes(tracker, annotated, [a], {P + "b": _pod("b", 15, labels={"app": "other"})}) == [(P + "b", 15)]
    tracker.pod_deleted(_pod("a", 16))
    assert _causes(tracker, annotated, []) == [(P + "a", 16)]
    relabelled = annotated.model_copy(deep=True)
    relabelled.metadata.resource_version, relabelled.metadata.labels = "17", {"team": "x"}
    assert _causes(tracker, relabelled, []) == [(S, 17)]  # Endpoints and slices copy the Service's labels
