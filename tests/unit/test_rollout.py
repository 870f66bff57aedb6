"""The Deployment controller's pure arithmetic (controllers/rollout.py), against kube's numbers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controllers import rollout
from kubelab.models import Deployment, DeploymentStatus, ReplicaSet

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def deployment(replicas: int = 3, *, surge: Any = "25%", unavailable: Any = "25%", strategy: str = "RollingUpdate",
               generation: int = 1, status: dict[str, Any] | None = None, image: str = "nginx:1.25") -> Deployment:
    spec: dict[str, Any] = {
        "replicas": replicas, "selector": {"matchLabels": {"app": "web"}}, "progressDeadlineSeconds": 600,
        "revisionHistoryLimit": 10,
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": image}]}},
        "strategy": {"type": strategy}}
    if strategy == "RollingUpdate":
        spec["strategy"]["rollingUpdate"] = {"maxSurge": surge, "maxUnavailable": unavailable}
    return Deployment.model_validate({"metadata": {"name": "web", "namespace": "default", "generation": generation},
                                      "spec": spec, "status": status or {}})


def rs(name: str, spec: int, *, available: int = 0, ready: int | None = None, replicas: int | None = None,
       created: str = "2026-01-01T00:00:00Z", annotations: dict[str, str] | None = None) -> ReplicaSet:
    return ReplicaSet.model_validate({
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "creationTimestamp": created,
                     "annotations": annotations or {}},
        "spec": {"replicas": spec},
        "status": {"replicas": spec if replicas is None else replicas, "availableReplicas": available,
                   "readyReplicas": available if ready is None else ready}})


@pytest.mark.parametrize(("replicas", "surge", "unavailable", "expected"), [
    pytest.param(3, "25%", "25%", (1, 0), id="3 replicas: surge rounds up, unavailable down"),
    pytest.param(10, "25%", "25%", (3, 2), id="10 replicas"),
    pytest.param(1, "25%", "25%", (1, 0), id="1 replica"),
    pytest.param(4, 0, 0, (0, 1), id="both zero: one may be unavailable"),
    pytest.param(5, 2, "40%", (2, 2), id="absolute surge"),
    pytest.param(4, "0%", "100%", (0, 4), id="all may go"),
])
def test_fenceposts(replicas: int, surge: Any, unavailable: Any, expected: tuple[int, int]) -> None:
    assert rollout.resolve_fenceposts(surge, unavailable, replicas) == expected


def test_max_unavailable_is_capped_and_zero_for_recreate() -> None:
    assert rollout.max_unavailable(deployment(2, surge=0, unavailable=5)) == 2
    assert rollout.max_unavailable(deployment(0)) == 0
    assert rollout.max_unavailable(deployment(3, strategy="Recreate")) == 0
    assert rollout.max_surge(deployment(3, strategy="Recreate")) == 0


def test_percentage_must_be_a_percentage() -> None:
    with pytest.raises(ValueError, match="not a percentage"):
        rollout.scaled_value("25", 4, round_up=True)


@pytest.mark.parametrize(("old_size", "new_size", "expected"), [
    pytest.param(0, 0, 3, id="first rollout: the new RS at full size"),
    pytest.param(3, 0, 1, id="3 old: one surge pod"),
    pytest.param(3, 1, 1, id="4 pods already: no more"),
    pytest.param(2, 1, 2, id="old shrank to 2: the new grows by one"),
    pytest.param(0, 3, 3, id="done"),
])
def test_new_replicaset_growth(old_size: int, new_size: int, expected: int) -> None:
    d = deployment(3)
    old, new = rs("web-old", old_size, available=old_size), rs("web-new", new_size)
    assert rollout.new_rs_new_replicas(d, [old, new], new) == expected


def test_recreate_new_replicaset_goes_to_full_size() -> None:
    d = deployment(4, strategy="Recreate")
    new = rs("web-new", 0)
    assert rollout.new_rs_new_replicas(d, [rs("web-old", 4), new], new) == 4


def test_rolling_update_scale_down_steps() -> None:
    d = deployment(3)
    # 3 old (available) + 1 new not yet available: nothing may go (3 - 0 unavailable must stay).
    old, new = rs("web-old", 3, available=3), rs("web-new", 1, available=0)
    assert rollout.max_scaled_down(d, [old, new], new) == 0
    # The new pod is available: one old pod may go.
    new = rs("web-new", 1, available=1)
    assert rollout.max_scaled_down(d, [old, new], new) == 1
    assert [(r.metadata.name, size) for r, size in rollout.scale_down_old(d, [old, new], [old])] == [("web-old", 2)]


def test_unhealthy_old_replicas_go_first_oldest_first() -> None:
    older = rs("web-a", 2, available=1, created="2026-01-01T00:00:00Z")
    newer = rs("web-b", 3, available=0, created="2026-01-01T01:00:00Z")
    plan = rollout.cleanup_unhealthy([newer, older], budget=3)
    assert [(r.metadata.name, size) for r, size in plan] == [("web-a", 1), ("web-b", 1)]


def test_proportional_scaling_worked_example() -> None:
    # 10 replicas mid-rollout (old 8, new 5, max-replicas 13) resized to 20 (surge 5, so 25 allowed).
    annotations = {rollout.MAX_REPLICAS: "13", rollout.DESIRED_REPLICAS: "10"}
    old = rs("web-old", 8, annotations=annotations, created="2026-01-01T00:00:00Z")
    new = rs("web-new", 5, annotations=annotations, created="2026-01-01T01:00:00Z")
    sizes, operation = rollout.proportional_sizes(deployment(20), [old, new])
    assert operation == "up"
    assert [(r.metadata.name, size) for r, size in sizes] == [("web-old", 15), ("web-new", 10)]


def test_proportional_scaling_down_gives_the_leftover_to_the_largest() -> None:
    annotations = {rollout.MAX_REPLICAS: "13"}
    old = rs("web-old", 8, annotations=annotations, created="2026-01-01T00:00:00Z")
    new = rs("web-new", 5, annotations=annotations, created="2026-01-01T01:00:00Z")
    sizes, operation = rollout.proportional_sizes(deployment(5), [old, new])  # 5 + surge 2 = 7 allowed
    assert operation == "down"
    assert {r.metadata.name: size for r, size in sizes} == {"web-old": 4, "web-new": 3}
    assert sum(size for _, size in sizes) == 7


def test_round_half_away_from_zero() -> None:
    assert [rollout._round_half_away(x) for x in (0.5, 1.5, 2.5, -0.5, -2.5)] == [1, 2, 3, -1, -3]


def test_find_active_or_latest() -> None:
    old = rs("web-old", 0, created="2026-01-01T00:00:00Z")
    new = rs("web-new", 2, created="2026-01-01T01:00:00Z")
    assert rollout.find_active_or_latest(new, [old]) is new
    assert rollout.find_active_or_latest(None, [old, rs("web-x", 0, created="2026-01-02T00:00:00Z")]).metadata.name \
        == "web-x"
    assert rollout.find_active_or_latest(new, [rs("web-busy", 1)]) is None


def test_pod_template_hash_format_and_stability() -> None:
    d = deployment(3)
    first = rollout.compute_hash(d.spec.template)
    assert first == rollout.compute_hash(deployment(5).spec.template)  # replicas are not in the template
    assert set(first) <= set("456789bcdf") and 1 <= len(first) <= 10
    assert rollout.compute_hash(deployment(image="nginx:1.26").spec.template) != first
    assert rollout.compute_hash(d.spec.template, 1) != first  # a collision count changes it
    assert rollout.safe_encode("0123456789") == "456789bcdf"


def test_template_equality_ignores_the_hash_label() -> None:
    d = deployment()
    labelled = d.spec.template.model_copy(deep=True)
    labelled.metadata.labels = {**labelled.metadata.labels, rollout.HASH_LABEL: "abc"}
    assert rollout.equal_ignore_hash(labelled, d.spec.template)
    assert not rollout.equal_ignore_hash(labelled, deployment(image="other").spec.template)


def test_new_replicaset_annotations() -> None:
    d = deployment(3)
    d.metadata.annotations = {"team": "web", rollout.LAST_APPLIED: "{}", rollout.REVISION: "7"}
    new = rs("web-new", 0)
    assert rollout.set_new_rs_annotations(d, new, "2", exists=False)
    assert new.metadata.annotations == {"team": "web", rollout.REVISION: "2", rollout.DESIRED_REPLICAS: "3",
                                        rollout.MAX_REPLICAS: "4"}
    revived = rs("web-old", 0, annotations={rollout.REVISION: "1"})
    assert rollout.set_new_rs_annotations(d, revived, "3", exists=True)
    assert revived.metadata.annotations[rollout.REVISION] == "3"
    assert revived.metadata.annotations[rollout.REVISION_HISTORY] == "1"


def test_status_counts_and_available_condition() -> None:
    d = deployment(3, generation=4)
    old, new = rs("web-old", 2, available=2), rs("web-new", 2, available=1, ready=2)
    status = rollout.calculate_status([old, new], new, d, NOW)
    assert (status.observed_generation, status.replicas, status.updated_replicas, status.ready_replicas,
            status.available_replicas, status.unavailable_replicas) == (4, 4, 2, 4, 3, 1)
    (cond,) = status.conditions
    assert (cond.type, cond.status, cond.reason, cond.message) == (
        "Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability.")
    starved = rollout.calculate_status([rs("web-new", 3, available=1)], None, d, NOW)
    assert (starved.conditions[0].status, starved.conditions[0].reason, starved.conditions[0].message) == (
        "False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability.")
    assert starved.updated_replicas is None  # zero counts are left out, as omitempty does


def test_set_condition_keeps_transition_time_and_moves_replaced_to_the_end() -> None:
    status = DeploymentStatus()
    rollout.set_condition(status, rollout.new_condition("Progressing", "True", "NewReplicaSetCreated", "m", NOW))
    rollout.set_condition(status, rollout.new_condition("Available", "True", "MinimumReplicasAvailable", "m", NOW))
    later = NOW + timedelta(minutes=1)
    rollout.set_condition(status, rollout.new_condition("Progressing", "True", "ReplicaSetUpdated", "m", later))
    assert [c.type for c in status.conditions] == ["Available", "Progressing"]
    progressing = status.conditions[1]
    assert progressing.last_transition_time == "2026-01-01T12:00:00Z"
    assert progressing.last_update_time == "2026-01-01T12:01:00Z"
    rollout.set_condition(status, rollout.new_condition("Progressing", "True", "ReplicaSetUpdated", "x", later))
    assert status.conditions[1].message == "m"  # same status and reason: no change


def test_rollout_status_messages() -> None:
    d = deployment(3, status={"replicas": 3, "updatedReplicas": 1, "availableReplicas": 3, "observedGeneration": 1,
                              "conditions": [{"type": "Progressing", "status": "True",
                                              "reason": "NewReplicaSetCreated",
                                              "lastUpdateTime": "2026-01-01T11:00:00Z",
                                              "lastTransitionTime": "2026-01-01T11:00:00Z"}]})
    old, new = rs("web-old", 1, available=1), rs("web-new", 3, available=3)
    status = rollout.rollout_status(d, [old, new], new, NOW)
    progressing = rollout.condition_of(status, "Progressing")
    assert (progressing.reason, progressing.message) == ("ReplicaSetUpdated", 'ReplicaSet "web-new" is progressing.')
    assert progressing.last_transition_time == "2026-01-01T11:00:00Z"
    done = rollout.rollout_status(d, [rs("web-old", 0, replicas=0), new], new, NOW)
    progressing = rollout.condition_of(done, "Progressing")
    assert (progressing.reason, progressing.message) == (
        "NewReplicaSetAvailable", 'ReplicaSet "web-new" has successfully progressed.')


def test_progress_deadline_exceeded() -> None:
    stuck = {"replicas": 3, "updatedReplicas": 1, "readyReplicas": 2, "availableReplicas": 2, "observedGeneration": 1,
             "conditions": [{"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated",
                             "lastUpdateTime": "2026-01-01T11:49:00Z",
                             "lastTransitionTime": "2026-01-01T11:00:00Z"}]}
    d = deployment(3, status=stuck)
    old, new = rs("web-old", 2, available=2), rs("web-new", 1, available=0, replicas=1)
    status = rollout.rollout_status(d, [old, new], new, NOW)
    progressing = rollout.condition_of(status, "Progressing")
    assert (progressing.status, progressing.reason, progressing.message) == (
        "False", "ProgressDeadlineExceeded", 'ReplicaSet "web-new" has timed out progressing.')
    fresh = rollout.rollout_status(d, [old, new], new, NOW - timedelta(minutes=5))
    assert rollout.condition_of(fresh, "Progressing").reason == "ReplicaSetUpdated"


def test_history_order_by_revision() -> None:
    rss = [rs("c", 0, annotations={rollout.REVISION: "10"}), rs("a", 0, annotations={rollout.REVISION: "2"}),
           rs("b", 0, annotations={rollout.REVISION: "9"})]
    assert [r.metadata.name for r in rollout.by_revision(rss)] == ["a", "b", "c"]
    assert rollout.max_revision(rss) == 10
