"""The StatefulSet controller's pure decision: which ordinal to create, delete or update next, under
OrderedReady and Parallel, with a partition; the pod identity; the status and its revisions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from controllers.statefulset import Action, calculate_status, new_pod, ordinal_of, plan
from kubelab.models import Pod, StatefulSet

NOW = datetime(2026, 12, 1, 22, 0, tzinfo=UTC)


def sts(replicas: int = 3, *, policy: str = "OrderedReady", partition: int | None = 0,
        strategy: str = "RollingUpdate") -> StatefulSet:
    update: dict[str, Any] = {"type": strategy}
    if strategy == "RollingUpdate" and partition is not None:
        update["rollingUpdate"] = {"partition": partition}
    return StatefulSet.model_validate({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "web", "namespace": "default", "uid": "sts-uid", "generation": 2},
        "spec": {"replicas": replicas, "serviceName": "web", "podManagementPolicy": policy, "updateStrategy": update,
                 "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})


def pod(ordinal: int, revision: str = "r1", *, ready: bool = True, phase: str = "Running",
        deleting: bool = False) -> Pod:
    meta: dict[str, Any] = {"name": f"web-{ordinal}", "namespace": "default",
                            "labels": {"app": "web", "controller-revision-hash": revision}}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T21:59:00Z"
    since = (NOW - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Pod.model_validate({"metadata": meta, "spec": {"containers": [{"name": "c", "image": "nginx"}]},
                               "status": {"phase": phase, "conditions": [
                                   {"type": "Ready", "status": "True" if ready else "False",
                                    "lastTransitionTime": since}]}})


def step(the_set: StatefulSet, pods: list[Pod], update: str = "r1", current: str = "r1") -> list[Action]:
    return plan(the_set, pods, current_revision=current, update_revision=update, current_replicas=len(pods), now=NOW)


def test_ordered_ready_creates_one_ordinal_at_a_time_waiting_for_each() -> None:
    assert step(sts(), []) == [Action("create", 0, revision="r1")]
    assert step(sts(), [pod(0, ready=False)]) == []  # web-0 not Ready yet: wait
    assert step(sts(), [pod(0, phase="Pending", ready=False)]) == []
    assert step(sts(), [pod(0)]) == [Action("create", 1, revision="r1")]
    assert step(sts(), [pod(0), pod(1)]) == [Action("create", 2, revision="r1")]
    assert step(sts(), [pod(0), pod(1), pod(2)]) == []
    # A missing middle ordinal is recreated before anything else.
    assert step(sts(), [pod(0), pod(2)]) == [Action("create", 1, revision="r1")]


def test_parallel_creates_and_deletes_everything_at_once() -> None:
    assert step(sts(policy="Parallel"), []) == [Action("create", i, revision="r1") for i in range(3)]
    assert step(sts(1, policy="Parallel"), [pod(0), pod(1), pod(2)]) == [
        Action("delete", 2, pod_name="web-2"), Action("delete", 1, pod_name="web-1")]


def test_scale_down_deletes_the_highest_ordinal_first_and_waits() -> None:
    pods = [pod(0), pod(1), pod(2)]
    assert step(sts(1), pods) == [Action("delete", 2, pod_name="web-2")]
    assert step(sts(1), [pod(0), pod(1), pod(2, deleting=True)]) == []  # wait for web-2 to be gone
    assert step(sts(1), [pod(0), pod(1)]) == [Action("delete", 1, pod_name="web-1")]
    # Nothing is deleted while a remaining pod is unhealthy.
    assert step(sts(1), [pod(0, ready=False), pod(1)]) == []


def test_failed_pods_are_replaced() -> None:
    assert step(sts(), [pod(0), pod(1, phase="Failed", ready=False)]) == [Action("delete", 1, pod_name="web-1")]


def test_rolling_update_goes_from_the_highest_ordinal_down_one_at_a_time() -> None:
    pods = [pod(0), pod(1), pod(2)]
    assert step(sts(), pods, update="r2") == [Action("delete", 2, pod_name="web-2")]
    # web-2 is being replaced: wait; it comes back at r2 (created from the update revision)...
    assert step(sts(), [pod(0), pod(1), pod(2, deleting=True)], update="r2") == []
    assert step(sts(), [pod(0), pod(1)], update="r2") == [Action("create", 2, revision="r2")]
    # ...not yet ready: wait; ready: next one down.
    assert step(sts(), [pod(0), pod(1), pod(2, "r2", ready=False)], update="r2") == []
    assert step(sts(), [pod(0), pod(1), pod(2, "r2")], update="r2") == [Action("delete", 1, pod_name="web-1")]
    assert step(sts(), [pod(0, "r2"), pod(1, "r2"), pod(2, "r2")], update="r2") == []


def test_partition_keeps_lower_ordinals_at_the_current_revision() -> None:
    the_set = sts(partition=2)
    assert step(the_set, [pod(0), pod(1), pod(2, "r2")], update="r2") == []
    # A lost pod below the partition comes back at the current revision, above it at the update revision.
    assert step(the_set, [pod(0), pod(2, "r2")], update="r2") == [Action("create", 1, revision="r1")]
    assert step(the_set, [pod(0), pod(1)], update="r2") == [Action("create", 2, revision="r2")]


def test_on_delete_never_deletes_for_an_update() -> None:
    assert step(sts(strategy="OnDelete"), [pod(0), pod(1), pod(2)], update="r2") == []
    assert step(sts(strategy="OnDelete"), [pod(0), pod(1)], update="r2") == [Action("create", 2, revision="r2")]


def test_pod_identity() -> None:
    the_set = sts()
    body = new_pod(the_set, 1, the_set.spec.template if the_set.spec else None, "r9")
    assert body["metadata"]["name"] == "web-1"
    assert (body["spec"]["hostname"], body["spec"]["subdomain"]) == ("web-1", "web")
    assert body["metadata"]["labels"] == {"app": "web", "statefulset.kubernetes.io/pod-name": "web-1",
                                          "apps.kubernetes.io/pod-index": "1", "controller-revision-hash": "r9"}
    assert ordinal_of(the_set, pod(12)) == 12
    assert ordinal_of(the_set, Pod.model_validate({"metadata": {"name": "web-01"}})) is None
    assert ordinal_of(the_set, Pod.model_validate({"metadata": {"name": "webx-1"}})) is None
    assert ordinal_of(the_set, Pod.model_validate({"metadata": {"name": "web-\u0663"}})) is None  # Arabic-Indic 3


def test_status_completes_the_rollout_when_every_pod_is_updated_and_ready() -> None:
    status = calculate_status(sts(), [pod(0), pod(1, "r2"), pod(2, "r2")], current_revision="r1",
                              update_revision="r2", now=NOW)
    assert (status.replicas, status.ready_replicas, status.current_replicas, status.updated_replicas,
            status.current_revision, status.update_revision, status.observed_generation) == (3, 3, 1, 2, "r1", "r2", 2)
    status = calculate_status(sts(), [pod(i, "r2") for i in range(3)], current_revision="r1", update_revision="r2",
                              now=NOW)
    assert (status.current_replicas, status.current_revision) == (3, "r2")
