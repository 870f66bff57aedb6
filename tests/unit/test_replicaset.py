"""The ReplicaSet controller's pure parts: which pods go first, slow start, status, expectations, claims."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controllers.expectations import Expectations
from controllers.ownership import Claim, adopt_patch, claim, release_patch
from controllers.replicaset import (
    calculate_status,
    is_pod_available,
    pod_from_template,
    pods_to_delete,
    rank_for_deletion,
    slow_start_batches,
)
from kubelab.models import Pod, ReplicaSet

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def ago(seconds: float) -> str:
    return (NOW - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(name: str, *, node: str = "node-1", phase: str = "Running", ready: bool | None = True,
        ready_for: float = 600, created: float = 3600, restarts: int = 0, cost: int | None = None,
        uid: str | None = None, labels: dict[str, str] | None = None, owner: str | None = None) -> Pod:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": uid or f"uid-{name}",
                            "creationTimestamp": ago(created), "labels": labels or {"app": "web"}}
    if cost is not None:
        meta["annotations"] = {"controller.kubernetes.io/pod-deletion-cost": str(cost)}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner,
                                    "uid": f"uid-{owner}", "controller": True}]
    status: dict[str, Any] = {"phase": phase, "containerStatuses": [{"name": "c", "restartCount": restarts}]}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False",
                                 "lastTransitionTime": ago(ready_for)}]
    return Pod.model_validate({"metadata": meta, "spec": {"nodeName": node} if node else {}, "status": status})


def replicaset(replicas: int = 3, *, min_ready: int = 0, generation: int = 2) -> ReplicaSet:
    return ReplicaSet.model_validate({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web-abc", "namespace": "default", "uid": "uid-web-abc", "generation": generation},
        "spec": {"replicas": replicas, "minReadySeconds": min_ready, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web", "tier": "front"},
                                           "annotations": {"a": "b"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})


@pytest.mark.parametrize(("first", "second"), [
    pytest.param(pod("a", node=""), pod("b"), id="1. unscheduled before scheduled"),
    pytest.param(pod("a", phase="Pending", ready=None), pod("b"), id="2. Pending before Running"),
    pytest.param(pod("a", phase="Unknown"), pod("b"), id="2. Unknown before Running"),
    pytest.param(pod("a", ready=False), pod("b"), id="3. not ready before ready"),
    pytest.param(pod("a", cost=-5), pod("b"), id="4. lower deletion cost first"),
    pytest.param(pod("a", ready_for=10), pod("b", ready_for=1000), id="6. ready for less time first"),
    pytest.param(pod("a", restarts=3), pod("b", restarts=0), id="7. more restarts first"),
    pytest.param(pod("a", created=10), pod("b", created=1000), id="8. newer first"),
])
def test_deletion_ranking(first: Pod, second: Pod) -> None:
    for order in ([first, second], [second, first]):
        assert [p.metadata.name for p in rank_for_deletion(order, [], NOW)] == ["a", "b"]


def test_doubled_up_pods_go_first() -> None:
    alone, crowded = pod("a", node="node-1"), pod("b", node="node-2")
    related = [crowded, pod("c", node="node-2"), alone]
    assert [p.metadata.name for p in rank_for_deletion([alone, crowded], related, NOW)] == ["b", "a"]


def test_same_log_bucket_breaks_ties_by_uid() -> None:
    # 1000 s and 1050 s ago fall in the same power-of-two bucket of nanoseconds (2^39 ns is 550 s, 2^40 ns
    # 1100 s): the UID decides, even against the creation order.
    older = pod("a", created=1050, uid="uid-1")
    newer = pod("b", created=1000, uid="uid-2")
    assert [p.metadata.name for p in rank_for_deletion([newer, older], [], NOW)] == ["a", "b"]


def test_pods_to_delete_skips_ranking_when_all_go() -> None:
    pods = [pod("a"), pod("b", node="")]
    assert [p.metadata.name for p in pods_to_delete(pods, [], 2, NOW)] == ["a", "b"]
    assert [p.metadata.name for p in pods_to_delete(pods, [], 1, NOW)] == ["b"]


@pytest.mark.parametrize(("count", "batches"), [
    (0, []), (1, [1]), (3, [1, 2]), (5, [1, 2, 2]), (10, [1, 2, 4, 3]), (16, [1, 2, 4, 8, 1])])
def test_slow_start_batches(count: int, batches: list[int]) -> None:
    assert slow_start_batches(count) == batches


def test_availability_with_min_ready_seconds() -> None:
    assert is_pod_available(pod("a", ready_for=5), 0, NOW)
    assert not is_pod_available(pod("a", ready_for=5), 10, NOW)
    assert is_pod_available(pod("a", ready_for=10), 10, NOW)
    assert not is_pod_available(pod("a", ready=False), 0, NOW)


def test_status() -> None:
    rs = replicaset(3, min_ready=30)
    pods = [pod("a", labels={"app": "web", "tier": "front"}, ready_for=60),
            pod("b", labels={"app": "web"}, ready_for=5), pod("c", ready=False)]
    status = calculate_status(rs, pods, None, NOW)
    assert (status.replicas, status.fully_labeled_replicas, status.ready_replicas, status.available_replicas) == \
        (3, 1, 2, 1)
    failed = calculate_status(rs, pods[:1], "pods \"x\" is forbidden", NOW, failure_reason="FailedCreate")
    (cond,) = failed.conditions
    assert (cond["type"], cond["status"], cond["reason"], cond["message"]) == (
        "ReplicaFailure", "True", "FailedCreate", 'pods "x" is forbidden')
    rs.status = failed
    assert calculate_status(rs, pods, None, NOW).conditions is None
    assert calculate_status(replicaset(0), [], None, NOW).replicas == 0  # always written


def test_pod_from_template() -> None:
    body = pod_from_template(replicaset())
    assert body["metadata"] == {
        "generateName": "web-abc-", "namespace": "default", "labels": {"app": "web", "tier": "front"},
        "annotations": {"a": "b"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc", "uid": "uid-web-abc",
                             "controller": True, "blockOwnerDeletion": True}]}
    assert body["spec"]["containers"][0]["image"] == "nginx"


def test_expectations() -> None:
    clock = [0.0]
    exp = Expectations(clock=lambda: clock[0], timeout=300)
    assert exp.satisfied("ns/rs")
    exp.expect_creations("ns/rs", 2)
    assert not exp.satisfied("ns/rs")
    exp.creation_observed("ns/rs")
    assert not exp.satisfied("ns/rs")
    exp.creation_observed("ns/rs")
    assert exp.satisfied("ns/rs")
    exp.expect_deletions("ns/rs", ["ns/a", "ns/b"])
    exp.deletion_observed("ns/rs", "ns/a")
    assert not exp.satisfied("ns/rs")
    clock[0] = 301
    assert exp.satisfied("ns/rs")  # expired: sync anyway


@pytest.mark.parametrize(("target", "matches", "owner_deleting", "expected"), [
    pytest.param(pod("p", owner="web-abc"), True, False, Claim.OWNED, id="ours and matching"),
    pytest.param(pod("p", owner="web-abc"), False, False, Claim.RELEASE, id="ours, no longer matching"),
    pytest.param(pod("p", owner="web-abc"), False, True, Claim.IGNORE, id="ours, owner going"),
    pytest.param(pod("p"), True, False, Claim.ADOPT, id="matching orphan"),
    pytest.param(pod("p"), True, True, Claim.IGNORE, id="orphan, owner going"),
    pytest.param(pod("p"), False, False, Claim.IGNORE, id="orphan not matching"),
    pytest.param(pod("p", owner="other"), True, False, Claim.IGNORE, id="another controller's"),
])
def test_claim(target: Pod, matches: bool, owner_deleting: bool, expected: Claim) -> None:
    rs = replicaset()
    if owner_deleting:
        rs.metadata.deletion_timestamp = "2026-01-01T00:00:00Z"
    assert claim(target, rs, matches=matches) is expected


def test_adopt_and_release_patches() -> None:
    rs, target = replicaset(), pod("p")
    assert adopt_patch(target, rs) == {"metadata": {"uid": "uid-p", "ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc", "uid": "uid-web-abc", "controller": True,
         "blockOwnerDeletion": True}]}}
    assert release_patch(target, "uid-web-abc") == {"metadata": {"uid": "uid-p", "ownerReferences": [
        {"$patch": "delete", "uid": "uid-web-abc"}]}}
