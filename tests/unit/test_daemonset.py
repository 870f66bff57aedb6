"""The DaemonSet controller's pure decisions: which nodes should run a daemon pod (selector, affinity,
taints against the default daemon tolerations), what the manage step creates and deletes, and how a
RollingUpdate proceeds within maxUnavailable / maxSurge."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controllers.daemonset import (
    FailedPodBackoff,
    calculate_status,
    daemon_tolerations,
    plan_nodes,
    plan_rolling_update,
    pod_for_node,
    should_run,
    target_node,
)
from kubelab.models import DaemonSet, Node, Pod

NOW = datetime(2026, 12, 1, 22, 0, tzinfo=UTC)


def ds(**template_spec: Any) -> DaemonSet:
    strategy = template_spec.pop("update_strategy", {"type": "RollingUpdate",
                                                     "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
    return DaemonSet.model_validate({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "default", "uid": "ds-uid", "generation": 3},
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "updateStrategy": strategy,
                 "template": {"metadata": {"labels": {"app": "agent"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox"}], **template_spec}}}})


def node(name: str, labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None) -> Node:
    return Node.model_validate({"metadata": {"name": name, "labels": labels or {}},
                                "spec": {"taints": taints} if taints else {}})


def pod(name: str, node_name: str, revision: str, *, ready: bool = True, created: int = 0,
        phase: str = "Running", deleting: bool = False) -> Pod:
    since = (NOW - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    meta: dict[str, Any] = {"name": name, "namespace": "default", "labels": {"app": "agent",
                                                                            "controller-revision-hash": revision},
                            "creationTimestamp": (NOW - timedelta(hours=1) + timedelta(seconds=created)
                                                  ).strftime("%Y-%m-%dT%H:%M:%SZ")}
    if deleting:
        meta["deletionTimestamp"] = since
    return Pod.model_validate({
        "metadata": meta, "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                                   "lastTransitionTime": since}]}})


@pytest.mark.parametrize(("template", "the_node", "expected"), [
    ({}, node("n"), (True, True)),
    ({"nodeSelector": {"disk": "ssd"}}, node("n", {"disk": "ssd"}), (True, True)),
    ({"nodeSelector": {"disk": "ssd"}}, node("n", {"disk": "hdd"}), (False, False)),
    ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}]}}}},
     node("n", {"zone": "b"}), (True, True)),
    ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}},
     node("n", {"zone": "b"}), (False, False)),
    ({"nodeName": "other"}, node("n"), (False, False)),
    # An untolerated NoSchedule taint keeps new pods away but lets a running one stay; NoExecute evicts.
    ({}, node("n", taints=[{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]), (False, True)),
    ({}, node("n", taints=[{"key": "dedicated", "value": "db", "effect": "NoExecute"}]), (False, False)),
    ({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoExecute"}]},
     node("n", taints=[{"key": "dedicated", "value": "db", "effect": "NoExecute"}]), (True, True)),
    ({}, node("n", taints=[{"key": "dedicated", "effect": "PreferNoSchedule"}]), (True, True)),
    # The tolerations every daemon pod gets.
    ({}, node("n", taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]), (True, True)),
    ({}, node("n", taints=[{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]), (True, True)),
    ({}, node("n", taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]), (True, True)),
    ({}, node("n", taints=[{"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"}]), (True, True)),
    ({}, node("n", taints=[{"key": "node.kubernetes.io/disk-pressure", "effect": "NoSchedule"}]), (True, True)),
    ({}, node("n", taints=[{"key": "node.kubernetes.io/pid-pressure", "effect": "NoSchedule"}]), (True, True)),
    # network-unavailable only for hostNetwork pods.
    ({}, node("n", taints=[{"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"}]),
     (False, True)),
    ({"hostNetwork": True},
     node("n", taints=[{"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"}]), (True, True)),
])
def test_which_nodes_should_run_a_daemon_pod(template: dict[str, Any], the_node: Node,
                                             expected: tuple[bool, bool]) -> None:
    assert should_run(ds(**template), the_node) == expected


def test_daemon_tolerations_keep_the_templates_and_add_the_defaults_once() -> None:
    template = ds(tolerations=[{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                                "tolerationSeconds": 30}]).spec.template.spec  # type: ignore[union-attr]
    tolerations = daemon_tolerations(template)
    assert [(t.key, t.effect) for t in tolerations].count(("node.kubernetes.io/not-ready", "NoExecute")) == 1
    assert tolerations[0].toleration_seconds == 30
    assert len(tolerations) == 6


def test_pod_for_node_pins_the_node_by_affinity_and_labels_the_revision() -> None:
    body = pod_for_node(ds(), "node-b", "abc123")
    assert body["spec"].get("nodeName") is None  # the scheduler binds it
    assert body["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-b"]}]}]}
    assert body["metadata"]["labels"] == {"app": "agent", "controller-revision-hash": "abc123",
                                          "pod-template-generation": "3"}
    assert body["metadata"]["generateName"] == "agent-"
    assert target_node(Pod.model_validate({"metadata": {"name": "x"}, "spec": body["spec"]})) == "node-b"


def test_manage_creates_where_missing_and_deletes_where_not_allowed_or_doubled() -> None:
    nodes = [node("a"), node("b"), node("c", {"x": "y"}, [{"key": "k", "effect": "NoExecute"}]), node("d")]
    pods = {"b": [pod("b2", "b", "h", created=2), pod("b1", "b", "h", created=1)],
            "c": [pod("c1", "c", "h")],
            "d": [pod("d1", "d", "h", phase="Failed")],
            "gone": [pod("g1", "gone", "h")]}
    plan = plan_nodes(ds(), nodes, pods, "h", NOW)
    assert plan.create_on == ["a"]
    # b keeps its oldest pod; c's taint evicts; the pod of a deleted node goes; d's failed pod is deleted
    # (as the node's backoff allows) and replaced in a later sync, once it is gone.
    assert sorted(plan.delete) == ["b2", "c1", "g1"]
    assert plan.failed == [("d", "d1")]


def test_manage_replaces_a_pod_only_once_it_is_gone() -> None:
    plan = plan_nodes(ds(), [node("d")], {"d": [pod("d1", "d", "h", phase="Failed", deleting=True)]}, "h", NOW)
    assert (plan.create_on, plan.delete) == (["d"], [])
    # A terminating pod that has not finished still holds its node.
    plan = plan_nodes(ds(), [node("d")], {"d": [pod("d1", "d", "h", deleting=True)]}, "h", NOW)
    assert (plan.create_on, plan.delete) == ([], [])


def test_failed_pod_backoff_doubles_up_to_its_maximum() -> None:
    clock = [100.0]
    backoff = FailedPodBackoff(lambda: clock[0], initial=1.0, maximum=4.0)
    assert backoff.remaining("ds/n") == 0.0
    waits = []
    for _ in range(5):
        backoff.next("ds/n")
        waits.append(backoff.remaining("ds/n"))
        clock[0] += waits[-1]
        assert backoff.remaining("ds/n") == 0.0
    assert waits == [1.0, 2.0, 4.0, 4.0, 4.0]
    assert backoff.remaining("ds/other") == 0.0


def test_rolling_update_without_surge_replaces_at_most_max_unavailable() -> None:
    pods = {n: [pod(f"{n}-old", n, "old")] for n in ("a", "b", "c")}
    plan = plan_rolling_update(ds(), pods, "new", 3, NOW)
    assert (plan.create_on, plan.delete) == ([], ["a-old"])
    # a is updated but not yet available: nothing else may go.
    pods["a"] = [pod("a-new", "a", "new", ready=False)]
    assert plan_rolling_update(ds(), pods, "new", 3, NOW).delete == []
    pods["a"] = [pod("a-new", "a", "new")]
    assert plan_rolling_update(ds(), pods, "new", 3, NOW).delete == ["b-old"]
    # An old pod that is not available anyway is replaced at once, beyond the budget.
    pods["c"] = [pod("c-old", "c", "old", ready=False)]
    assert plan_rolling_update(ds(), pods, "new", 3, NOW).delete == ["c-old", "b-old"]
    # maxUnavailable 2 of 3 (67% rounds up to 3, capped by candidates).
    wide = ds(update_strategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "67%", "maxSurge": 0}})
    pods = {n: [pod(f"{n}-old", n, "old")] for n in ("a", "b", "c")}
    assert plan_rolling_update(wide, pods, "new", 3, NOW).delete == ["a-old", "b-old", "c-old"]


def test_rolling_update_with_surge_starts_new_pods_beside_old_ones() -> None:
    surge = ds(update_strategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}})
    pods = {n: [pod(f"{n}-old", n, "old")] for n in ("a", "b")}
    plan = plan_rolling_update(surge, pods, "new", 2, NOW)
    assert (plan.create_on, plan.delete) == (["a"], [])
    pods["a"].append(pod("a-new", "a", "new", ready=False, created=10))
    assert plan_rolling_update(surge, pods, "new", 2, NOW).create_on == []  # waiting for it to be available
    # The manage step keeps both pods while the new one is not available...
    assert plan_nodes(surge, [node("a"), node("b")], pods, "new", NOW).delete == []
    pods["a"][1] = pod("a-new", "a", "new", created=10)
    # ...and the update deletes the old one once it is, surging onto the next node.
    plan = plan_rolling_update(surge, pods, "new", 2, NOW)
    assert (plan.create_on, plan.delete) == (["b"], ["a-old"])


def test_status_counts_nodes_that_should_run_and_misscheduled_pods() -> None:
    nodes = [node("a"), node("b"), node("c", taints=[{"key": "k", "effect": "NoSchedule"}])]
    pods = {"a": [pod("a1", "a", "new")], "b": [pod("b1", "b", "old", ready=False)], "c": [pod("c1", "c", "new")]}
    status = calculate_status(ds(), nodes, pods, "new", NOW)
    assert (status.desired_number_scheduled, status.current_number_scheduled, status.number_misscheduled,
            status.number_ready, status.number_available, status.updated_number_scheduled,
            status.number_unavailable, status.observed_generation) == (2, 2, 1, 1, 1, 1, 1, 3)
