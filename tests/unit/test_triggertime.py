"""The last-change-trigger-time rule (controllers/triggertime.py), as table tests."""

from __future__ import annotations

from typing import Any

import pytest

from controllers.triggertime import TriggerTimeTracker, format_time, pod_trigger_time, trigger_revision
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
