"""The API server's trace rings and the timeline they give (apiserver/traces.py), from records made
by hand: what `kubelab trace` shows for a Service change and which records it picks."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.traces import Accepted, TraceRecorder, timeline

SVC = "/registry/services/default/web"
SLICE = "/registry/endpointslices/default/web-abc"
OTHER = "/registry/endpointslices/default/other-xyz"
POD = "/registry/pods/default/web-1"


def recorder_with_a_service_change() -> TraceRecorder:
    r = TraceRecorder()
    r.accepted.append(Accepted(SVC, 10, 100.000, 100.002, "create", "kubectl/v1.32"))
    r.delivered.append((SVC, 10, "kubelab-controllers", 100.003))
    r.delivered.append((SVC, 10, "kubelab-proxy-node-1", 100.004))
    r.delivered.append((SVC, 9, "kubelab-proxy-node-2", 99.0))  # an older change: not this trace's
    r.accepted.append(Accepted(SLICE, 12, 100.010, 100.012, "create", "kubelab-controllers"))
    r.delivered.append((SLICE, 12, "kubelab-proxy-node-1", 100.013))
    r.report({"type": "endpoints", "controller": "endpointslice-controller", "service": "default/web",
              "object": SLICE, "revision": 12, "triggerRevision": 10, "at": 100.012,
              "causes": [[SVC, 10], [POD, 9]]}, "kubelab-controllers")
    r.report({"type": "endpoints", "controller": "endpointslice-controller", "service": "default/web",
              "object": SLICE, "revision": 8, "triggerRevision": 7, "at": 90.0, "causes": [[SVC, 7]]},
             "kubelab-controllers")
    # A later write whose inputs are newer than the Service's change but that it did not cause (the old
    # join, "triggerRevision >= 10", took it).
    r.report({"type": "endpoints", "controller": "endpointslice-controller", "service": "default/web",
              "object": SLICE, "revision": 16, "triggerRevision": 15, "at": 100.400, "causes": [[POD, 15]]},
             "kubelab-controllers")
    sync: dict[str, Any] = {"type": "proxy-sync", "node": "node-1", "full": False, "startedAt": 100.014,
                            "restoreSeconds": 0.003, "syncSeconds": 0.004, "services": ["default/web"]}
    r.report({**sync, "servicesRevision": 10, "slicesRevision": 11, "doneAt": 100.015,
              "applied": [[OTHER, 11]]}, "proxy")  # another Service's
    r.report({**sync, "servicesRevision": 10, "slicesRevision": 12, "doneAt": 100.020,
              "applied": [[SVC, 10], [SLICE, 12]]}, "proxy")
    r.report({**sync, "servicesRevision": 13, "slicesRevision": 16, "doneAt": 100.500,
              "applied": [[SLICE, 16]]}, "proxy")  # a later one
    return r


def test_a_service_change_from_write_to_rules() -> None:
    result = timeline(recorder_with_a_service_change(), SVC)
    steps = [(s["step"], s["component"]) for s in result["steps"]]
    assert steps == [("accepted", "apiserver"), ("delivered", "kubelab-controllers"),
                     ("delivered", "kubelab-proxy-node-1"), ("endpoints written", "kubelab-controllers"),
                     ("delivered", "kubelab-proxy-node-1"), ("rules applied", "proxy node-1")]
    applied = result["steps"][-1]
    assert applied["sinceAccepted"] == pytest.approx(0.020)
    assert applied["took"] == pytest.approx(0.003)
    assert result["steps"][0]["took"] == pytest.approx(0.002)  # etcd's acknowledgement
    assert result["services"] == ["default/web"]
    assert [s["detail"] for s in result["steps"] if s["step"] == "endpoints written"] == [
        "endpointslice-controller: endpointslices/default/web-abc at revision 12"]


def test_a_change_that_caused_no_write_has_none_in_its_trace() -> None:
    """A pod's label-only change (revision 14) wrote nothing; the slice written at 16 for another
    change of the same pod, and the sync that applied it, are not its consequences."""
    r = recorder_with_a_service_change()
    r.accepted.append(Accepted(POD, 14, 100.300, 100.301, "patch", "kubectl/v1.32"))
    result = timeline(r, POD)
    assert [s["step"] for s in result["steps"]] == ["accepted"]
    assert result["services"] == []


def test_a_later_change_of_the_pod_is_followed_to_its_own_write_and_sync() -> None:
    r = recorder_with_a_service_change()
    r.accepted.append(Accepted(POD, 15, 100.390, 100.391, "update", "kubelab-node-1"))
    r.accepted.append(Accepted(SLICE, 16, 100.395, 100.396, "update", "kubelab-controllers"))
    result = timeline(r, POD)
    assert [(s["step"], s["detail"].split(" (")[0]) for s in result["steps"]] == [
        ("accepted", "update by kubelab-node-1, written to etcd at revision 15"),
        ("endpoints written", "endpointslice-controller: endpointslices/default/web-abc at revision 16"),
        ("rules applied", "partial iptables-restore")]


def test_an_object_never_written_is_not_found() -> None:
    result = timeline(TraceRecorder(), SVC)
    assert result["found"] is False and "no write" in result["message"]


@pytest.mark.parametrize("body", [
    pytest.param({"type": "nonsense"}, id="unknown type"),
    pytest.param({"type": "endpoints", "controller": "x", "service": "a/b", "object": SLICE, "revision": "12",
                  "triggerRevision": 1, "at": 1.0}, id="revision not a number"),
    pytest.param({"type": "proxy-sync", "node": "n", "servicesRevision": 1, "slicesRevision": 1, "full": "yes",
                  "startedAt": 1, "doneAt": 2, "restoreSeconds": 0, "syncSeconds": 0}, id="full not a bool"),
    pytest.param({"type": "proxy-sync", "node": "n", "servicesRevision": 1, "slicesRevision": 1, "full": True,
                  "startedAt": 1, "doneAt": 2, "restoreSeconds": 0, "syncSeconds": 0, "applied": [["k", "1"]]},
                 id="applied revision not a number"),
    pytest.param({"type": "endpoints", "controller": "x", "service": "a/b", "object": SLICE, "revision": 12,
                  "triggerRevision": 1, "at": 1.0, "causes": "everything"}, id="causes not a list"),
])
def test_malformed_reports_are_refused(body: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        TraceRecorder().report(body, "x")


def test_the_reports_ring_holds_a_bounded_number_of_pairs(monkeypatch: pytest.MonkeyPatch) -> None:
    from apiserver import traces

    monkeypatch.setattr(traces, "PAIRS_CAPACITY", 10)
    r = TraceRecorder(reports=100)
    sync: dict[str, Any] = {"type": "proxy-sync", "node": "n", "servicesRevision": 1, "slicesRevision": 1,
                            "full": True, "startedAt": 1.0, "doneAt": 2.0, "restoreSeconds": 0.0, "syncSeconds": 0.0}
    for i in range(7):
        r.report({**sync, "applied": [[f"/registry/services/default/s{i}", j] for j in range(3)]}, "proxy")
    assert r.pairs_held <= 10 and len(r.reports) == 3  # the oldest went first
    assert min(r.reports[0]["applied"]) == ("/registry/services/default/s4", 0)
