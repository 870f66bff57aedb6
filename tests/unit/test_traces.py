"""The API server's trace rings and the timeline they give (apiserver/traces.py), from records made
by hand: what `kubelab trace` shows for a Service change and which records it picks."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.traces import Accepted, TraceRecorder, timeline

SVC = "/registry/services/default/web"
SLICE = "/registry/endpointslices/default/web-abc"


def recorder_with_a_service_change() -> TraceRecorder:
    r = TraceRecorder()
    r.accepted.append(Accepted(SVC, 10, 100.000, 100.002, "create", "kubectl/v1.32"))
    r.delivered.append((SVC, 10, "kubelab-controllers", 100.003))
    r.delivered.append((SVC, 10, "kubelab-proxy-node-1", 100.004))
    r.delivered.append((SVC, 9, "kubelab-proxy-node-2", 99.0))  # an older change: not this trace's
    r.accepted.append(Accepted(SLICE, 12, 100.010, 100.012, "create", "kubelab-controllers"))
    r.delivered.append((SLICE, 12, "kubelab-proxy-node-1", 100.013))
    r.report({"type": "endpoints", "controller": "endpointslice-controller", "service": "default/web",
              "object": SLICE, "revision": 12, "triggerRevision": 10, "at": 100.012}, "kubelab-controllers")
    r.report({"type": "endpoints", "controller": "endpointslice-controller", "service": "default/web",
              "object": SLICE, "revision": 8, "triggerRevision": 7, "at": 90.0}, "kubelab-controllers")
    sync: dict[str, Any] = {"type": "proxy-sync", "node": "node-1", "full": False, "startedAt": 100.014,
                            "restoreSeconds": 0.003, "syncSeconds": 0.004, "services": ["default/web"]}
    r.report({**sync, "servicesRevision": 10, "slicesRevision": 11, "doneAt": 100.015}, "proxy")  # before the slice
    r.report({**sync, "servicesRevision": 10, "slicesRevision": 12, "doneAt": 100.020}, "proxy")
    r.report({**sync, "servicesRevision": 13, "slicesRevision": 14, "doneAt": 100.500}, "proxy")  # a later one
    return r


def test_a_service_change_from_write_to_rules() -> None:
    result = timeline(recorder_with_a_service_change(), SVC, services=["default/web"])
    steps = [(s["step"], s["component"]) for s in result["steps"]]
    assert steps == [("accepted", "apiserver"), ("delivered", "kubelab-controllers"),
                     ("delivered", "kubelab-proxy-node-1"), ("endpoints written", "kubelab-controllers"),
                     ("delivered", "kubelab-proxy-node-1"), ("rules applied", "proxy node-1")]
    applied = result["steps"][-1]
    assert applied["sinceAccepted"] == pytest.approx(0.020)
    assert applied["took"] == pytest.approx(0.003)
    assert result["steps"][0]["took"] == pytest.approx(0.002)  # etcd's acknowledgement


def test_an_object_never_written_is_not_found() -> None:
    result = timeline(TraceRecorder(), SVC, services=["default/web"])
    assert result["found"] is False and "no write" in result["message"]


@pytest.mark.parametrize("body", [
    pytest.param({"type": "nonsense"}, id="unknown type"),
    pytest.param({"type": "endpoints", "controller": "x", "service": "a/b", "object": SLICE, "revision": "12",
                  "triggerRevision": 1, "at": 1.0}, id="revision not a number"),
    pytest.param({"type": "proxy-sync", "node": "n", "servicesRevision": 1, "slicesRevision": 1, "full": "yes",
                  "startedAt": 1, "doneAt": 2, "restoreSeconds": 0, "syncSeconds": 0}, id="full not a bool"),
])
def test_malformed_reports_are_refused(body: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        TraceRecorder().report(body, "x")
