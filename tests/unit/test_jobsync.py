"""The Job controller's pure decisions (controllers/jobsync.py): how many pods, which indexes, how finished
pods are counted through uncountedTerminatedPods, when the Job fails or completes, back-off, suspend and
podFailurePolicy. Each case is a Job and its pods in, the plan out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controllers import jobpods, jobsync
from kubelab import timeutil
from kubelab.models import Job, Pod

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def job(status: dict[str, Any] | None = None, **spec: Any) -> Job:
    body: dict[str, Any] = {"apiVersion": "batch/v1", "kind": "Job",
                            "metadata": {"name": "pi", "namespace": "default", "uid": "job-uid"},
                            "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 6,
                                     "completionMode": "NonIndexed", "suspend": False,
                                     "template": {"metadata": {"labels": {"job-name": "pi"}},
                                                  "spec": {"restartPolicy": "Never",
                                                           "containers": [{"name": "main", "image": "busybox"}]}},
                                     **spec}}
    if status is not None:
        body["status"] = status
    return Job.from_dict(body)


_counter = iter(range(1000))


def pod(phase: str = "Running", *, finalizer: bool = True, exit_code: int | None = None, ready: bool = False,
        finished: datetime | None = None, index: int | None = None, deleting: bool = False,
        uid: str | None = None) -> Pod:
    n = next(_counter)
    meta: dict[str, Any] = {"name": f"pi-{n}", "namespace": "default", "uid": uid or f"pod-{n}",
                            "finalizers": [jobpods.TRACKING_FINALIZER] if finalizer else None}
    if index is not None:
        meta["annotations"] = {jobpods.COMPLETION_INDEX: str(index)}
    if deleting:
        meta["deletionTimestamp"] = timeutil.rfc3339(NOW)
    status: dict[str, Any] = {"phase": phase}
    if exit_code is not None:
        status["containerStatuses"] = [{"name": "main", "state": {"terminated": {
            "exitCode": exit_code, "finishedAt": timeutil.rfc3339(finished or NOW - timedelta(minutes=10))}}}]
    if ready:
        status["conditions"] = [{"type": "Ready", "status": "True"}]
    return Pod.from_dict({"metadata": meta, "status": status})


def conditions(plan: jobsync.Plan) -> list[tuple[str, str, str]]:
    return [(c.type or "", c.status or "", c.reason or "") for c in plan.status.conditions or []]


def test_new_job_creates_one_pod_and_starts() -> None:
    plan = jobsync.plan(job(), [], NOW)
    assert plan.create == [None]
    assert plan.status.start_time == timeutil.rfc3339(NOW)
    assert plan.status.ready == 0 and plan.status.active is None


@pytest.mark.parametrize(("spec", "pods", "creates"), [
    pytest.param({"completions": 5, "parallelism": 2}, [], 2, id="parallelism caps"),
    pytest.param({"completions": 5, "parallelism": 2}, ["Running"], 1, id="one running"),
    pytest.param({"completions": 3, "parallelism": 5}, [], 3, id="completions cap"),
    pytest.param({"completions": None, "parallelism": 3}, [], 3, id="work queue"),
    pytest.param({"completions": None, "parallelism": 3}, ["Running"], 2, id="work queue, one running"),
])
def test_pod_counts(spec: dict[str, Any], pods: list[str], creates: int) -> None:
    plan = jobsync.plan(job(**spec), [pod(p) for p in pods], NOW)
    assert len(plan.create) == creates


def test_a_finished_pod_is_recorded_uncounted_then_counted_once() -> None:
    done = pod("Succeeded", exit_code=0)
    plan = jobsync.plan(job({"startTime": timeutil.rfc3339(NOW)}), [done], NOW)
    # First the UID goes into uncountedTerminatedPods (written before the finalizer is removed)...
    assert plan.interim_status is not None
    assert plan.interim_status.uncounted_terminated_pods.succeeded == [done.metadata.uid]
    assert plan.remove_finalizer == [done]
    # ...then the count, with the uncounted list emptied, and the Job's success criteria met.
    assert plan.status.succeeded == 1
    assert plan.status.uncounted_terminated_pods.to_dict() == {}
    assert conditions(plan) == [("SuccessCriteriaMet", "True", "CompletionsReached"),
                                ("Complete", "True", "CompletionsReached")]
    assert plan.status.completion_time == timeutil.rfc3339(NOW)
    assert plan.create == []

    # The next sync sees the pod without its finalizer: it is not counted again.
    counted = job({"startTime": timeutil.rfc3339(NOW), "succeeded": 1,
                   "conditions": [c.to_dict() for c in plan.status.conditions or []]})
    again = jobsync.plan(counted, [pod("Succeeded", finalizer=False, exit_code=0)], NOW)
    assert again.status.succeeded == 1 and again.remove_finalizer == [] and again.interim_status is None


def test_a_pod_whose_finalizer_removal_the_cache_has_not_seen_is_not_counted_twice() -> None:
    done = pod("Succeeded", exit_code=0, uid="seen-once")
    plan = jobsync.plan(job({"succeeded": 1, "startTime": timeutil.rfc3339(NOW)}, completions=3), [done], NOW,
                        finalizers_removed=frozenset({"seen-once"}))
    assert plan.status.succeeded == 1
    assert plan.interim_status is None


def test_uncounted_pods_from_an_interrupted_sync_are_counted() -> None:
    done = pod("Failed", exit_code=1, uid="half-done")
    plan = jobsync.plan(job({"startTime": timeutil.rfc3339(NOW),
                             "uncountedTerminatedPods": {"failed": ["half-done"]}}, completions=2), [done], NOW)
    assert plan.remove_finalizer == [done] and plan.interim_status is None
    assert plan.status.failed == 1


def test_backoff_limit_exceeded_fails_the_job_after_its_pods_are_gone() -> None:
    failures = [pod("Failed", exit_code=1, finalizer=False) for _ in range(3)]
    status = {"startTime": timeutil.rfc3339(NOW), "failed": 2}
    running = pod("Running")
    plan = jobsync.plan(job(status, backoffLimit=1, parallelism=2, completions=2), [*failures, running], NOW)
    assert conditions(plan) == [("FailureTarget", "True", "BackoffLimitExceeded")]
    assert plan.delete == [running] and plan.create == []
    assert ("Warning", "BackoffLimitExceeded", "Job has reached the specified backoff limit") in plan.events
    # Once the running pod is gone, the Failed condition follows.
    target = job({**status, "conditions": [c.to_dict() for c in plan.status.conditions or []]},
                 backoffLimit=1, parallelism=2, completions=2)
    final = jobsync.plan(target, failures, NOW)
    assert conditions(final) == [("FailureTarget", "True", "BackoffLimitExceeded"),
                                 ("Failed", "True", "BackoffLimitExceeded")]
    assert final.status.completion_time is None and final.status.active is None


def test_on_failure_restarts_count_against_the_backoff_limit() -> None:
    restarting = Pod.from_dict({"metadata": {"name": "p", "uid": "u", "finalizers": [jobpods.TRACKING_FINALIZER]},
                                "status": {"phase": "Running", "containerStatuses": [{"name": "main",
                                                                                      "restartCount": 2}]}})
    spec = {"backoffLimit": 2, "template": {"spec": {"restartPolicy": "OnFailure",
                                                     "containers": [{"name": "main", "image": "b"}]}}}
    plan = jobsync.plan(job({"startTime": timeutil.rfc3339(NOW)}, **spec), [restarting], NOW)
    assert conditions(plan)[0] == ("FailureTarget", "True", "BackoffLimitExceeded")


def test_active_deadline() -> None:
    started = timeutil.rfc3339(NOW - timedelta(seconds=30))
    late = jobsync.plan(job({"startTime": started}, activeDeadlineSeconds=30), [pod("Running")], NOW)
    assert conditions(late) == [("FailureTarget", "True", "DeadlineExceeded")]
    early = jobsync.plan(job({"startTime": started}, activeDeadlineSeconds=60), [pod("Running")], NOW)
    assert conditions(early) == [] and early.requeue_after == pytest.approx(30.5)


@pytest.mark.parametrize(("failures", "since", "wait"), [
    pytest.param(1, 0, 10.0, id="10 s after the first failure"),
    pytest.param(2, 5, 15.0, id="20 s after the second"),
    pytest.param(3, 45, 0.0, id="40 s after the third, already passed"),
    pytest.param(9, 0, 360.0, id="capped at 6 min"),
])
def test_backoff_between_retries(failures: int, since: float, wait: float) -> None:
    pods = [pod("Failed", exit_code=1, finalizer=False, finished=NOW - timedelta(seconds=since + 100 * (failures - i)))
            for i in range(failures - 1)]
    pods.append(pod("Failed", exit_code=1, finalizer=False, finished=NOW - timedelta(seconds=since)))
    assert jobpods.backoff_remaining(pods, NOW) == pytest.approx(wait)
    plan = jobsync.plan(job({"startTime": timeutil.rfc3339(NOW), "failed": failures}, backoffLimit=20), pods, NOW)
    assert plan.create == ([] if wait else [None])


def test_a_success_resets_the_backoff() -> None:
    pods = [pod("Failed", exit_code=1, finalizer=False, finished=NOW - timedelta(seconds=3)),
            pod("Succeeded", exit_code=0, finalizer=False, finished=NOW - timedelta(seconds=2))]
    assert jobpods.backoff_remaining(pods, NOW) == 0.0


def test_indexed_job_runs_each_missing_index_once() -> None:
    spec = {"completionMode": "Indexed", "completions": 5, "parallelism": 3}
    pods = [pod("Running", index=1), pod("Succeeded", exit_code=0, index=0)]
    plan = jobsync.plan(job({"startTime": timeutil.rfc3339(NOW), "completedIndexes": "3"}, **spec), pods, NOW)
    assert plan.create == [2, 4]
    assert plan.status.completed_indexes == "0,3"
    assert plan.status.succeeded == 2


@pytest.mark.parametrize(("indexes", "text"), [
    pytest.param({1, 3, 4, 5, 7}, "1,3-5,7", id="kube's example"),
    pytest.param({0, 1}, "0,1", id="two consecutive stay apart"),
    pytest.param(set(), "", id="none"),
])
def test_completed_indexes_format(indexes: set[int], text: str) -> None:
    assert jobpods.format_indexes(indexes) == text
    assert jobpods.parse_indexes(text, limit=10) == indexes


def test_indexed_pod_template() -> None:
    body = jobpods.pod_from_template(job(completionMode="Indexed", completions=3), 2)
    meta, spec = body["metadata"], body["spec"]
    assert meta["generateName"] == "pi-2-"
    assert meta["annotations"] == {jobpods.COMPLETION_INDEX: "2"}
    assert meta["labels"][jobpods.COMPLETION_INDEX] == "2"
    assert meta["finalizers"] == [jobpods.TRACKING_FINALIZER]
    assert meta["ownerReferences"][0]["controller"] is True
    assert spec["hostname"] == "pi-2"
    assert spec["containers"][0]["env"][0] == {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
        "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}


def test_suspend_and_resume() -> None:
    running = pod("Running")
    suspended = jobsync.plan(job({"startTime": timeutil.rfc3339(NOW)}, suspend=True), [running], NOW)
    assert suspended.delete == [running] and suspended.create == []
    assert conditions(suspended) == [("Suspended", "True", "JobSuspended")]
    assert suspended.status.start_time is None
    status = {"conditions": [c.to_dict() for c in suspended.status.conditions or []]}
    resumed = jobsync.plan(job(status), [], NOW)
    assert conditions(resumed) == [("Suspended", "False", "JobResumed")]
    assert resumed.create == [None] and resumed.status.start_time == timeutil.rfc3339(NOW)


@pytest.mark.parametrize(("rules", "exit_code", "outcome"), [
    pytest.param([{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}], 42, "FailJob",
                 id="FailJob on 42"),
    pytest.param([{"action": "Ignore", "onExitCodes": {"operator": "In", "values": [42]}}], 42, "Ignore",
                 id="Ignore on 42"),
    pytest.param([{"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [1, 2]}}], 1, "Count",
                 id="NotIn spares 1"),
    pytest.param([{"action": "Count", "onExitCodes": {"operator": "In", "values": [1]}},
                  {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1]}}], 1, "Count",
                 id="first rule wins"),
])
def test_pod_failure_policy(rules: list[dict[str, Any]], exit_code: int, outcome: str) -> None:
    failed = pod("Failed", exit_code=exit_code)
    plan = jobsync.plan(job({"startTime": timeutil.rfc3339(NOW)}, podFailurePolicy={"rules": rules}, completions=3),
                        [failed], NOW)
    if outcome == "FailJob":
        assert conditions(plan) == [("FailureTarget", "True", "PodFailurePolicy"), ("Failed", "True", "PodFailurePolicy")]
        assert plan.status.conditions[0].message == (  # type: ignore[index]
            f"Container main for pod default/{failed.metadata.name} failed with exit code 42 matching FailJob rule "
            "at index 0")
    elif outcome == "Ignore":
        assert plan.status.failed is None and plan.remove_finalizer == [failed] and conditions(plan) == []
    else:
        assert plan.status.failed == 1 and conditions(plan) == []


def test_disruption_target_condition_matches_on_pod_conditions() -> None:
    evicted = Pod.from_dict({"metadata": {"name": "p", "namespace": "default", "uid": "u",
                                          "finalizers": [jobpods.TRACKING_FINALIZER]},
                             "status": {"phase": "Failed", "conditions": [{"type": "DisruptionTarget",
                                                                           "status": "True"}]}})
    rules = [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]
    plan = jobsync.plan(job({"startTime": timeutil.rfc3339(NOW)}, podFailurePolicy={"rules": rules}), [evicted], NOW)
    assert plan.status.failed is None and plan.create == [None]


@pytest.mark.parametrize(("policy", "creates"), [
    pytest.param("TerminatingOrFailed", [None], id="TerminatingOrFailed replaces at once"),
    pytest.param("Failed", [], id="Failed waits for the pod to stop"),
])
def test_pod_replacement_policy(policy: str, creates: list[int | None]) -> None:
    terminating = pod("Running", deleting=True, finalizer=False)
    # The deletion counts as a failure for the back-off too: look after its 10 s.
    later = NOW + timedelta(seconds=11)
    plan = jobsync.plan(job({"startTime": timeutil.rfc3339(NOW)}, podReplacementPolicy=policy), [terminating], later)
    assert plan.create == creates
    assert plan.status.terminating == 1


def test_huge_jobs_cost_what_they_run() -> None:
    """A million-index Job and a hand-written completedIndexes spanning a billion create 500 pods per sync and
    read only the indexes below completions."""
    spec = {"completionMode": "Indexed", "completions": 1_000_000, "parallelism": 1_000_000}
    plan = jobsync.plan(job({"startTime": timeutil.rfc3339(NOW), "completedIndexes": "0-999999999"}, **spec), [], NOW)
    assert plan.create == []  # all of 0..999999 are complete
    assert plan.status.completed_indexes == "0-999999"
    fresh = jobsync.plan(job({"startTime": timeutil.rfc3339(NOW)}, **spec), [], NOW)
    assert fresh.create == list(range(500))
    queue = jobsync.plan(job({"startTime": timeutil.rfc3339(NOW)}, completions=None, parallelism=100_000), [], NOW)
    assert len(queue.create) == 500


def _failed_index_pod(index: int, failures_before: int, finished: datetime | None = None) -> Pod:
    failed = pod("Failed", exit_code=1, finalizer=False, index=index, finished=finished)
    failed.metadata.annotations = {**(failed.metadata.annotations or {}),
                                   jobpods.INDEX_FAILURE_COUNT: str(failures_before)}
    return failed


def test_backoff_limit_per_index() -> None:
    spec = {"completionMode": "Indexed", "completions": 3, "parallelism": 3, "backoffLimitPerIndex": 1,
            "backoffLimit": 2**31 - 1}
    later = NOW + timedelta(minutes=30)  # past any back-off
    # Index 1 failed once: it is retried, its replacement carrying the count.
    once = jobsync.plan(job({"startTime": timeutil.rfc3339(NOW), "completedIndexes": "0,2"}, **spec),
                        [_failed_index_pod(1, 0)], later)
    assert once.create == [1] and once.index_failures == {1: 1}
    assert once.status.failed_indexes == ""
    body = jobpods.pod_from_template(job(**spec), 1, failures=1)
    assert body["metadata"]["annotations"][jobpods.INDEX_FAILURE_COUNT] == "1"
    # Twice: the index has failed for good, and with the others complete the Job fails.
    twice = jobsync.plan(job({"startTime": timeutil.rfc3339(NOW), "completedIndexes": "0,2"}, **spec),
                         [_failed_index_pod(1, 0), _failed_index_pod(1, 1)], later)
    assert twice.create == []
    assert twice.status.failed_indexes == "1"
    assert conditions(twice)[-1] == ("Failed", "True", "FailedIndexes")


def test_each_index_waits_out_its_own_backoff() -> None:
    """backoffLimitPerIndex: index 0 (first failure, 10 s) and index 1 (second failure, 20 s) failed 5 s ago;
    index 2 never ran and is created at once, the others when their own back-off ends."""
    spec = {"completionMode": "Indexed", "completions": 3, "parallelism": 3, "backoffLimitPerIndex": 3,
            "backoffLimit": 2**31 - 1}
    pods = [_failed_index_pod(0, 0, NOW - timedelta(seconds=5)), _failed_index_pod(1, 1, NOW - timedelta(seconds=5))]
    status = {"startTime": timeutil.rfc3339(NOW - timedelta(minutes=1))}
    assert jobpods.index_backoff_remaining(pods, NOW) == {0: pytest.approx(5.0), 1: pytest.approx(15.0)}
    first = jobsync.plan(job(status, **spec), pods, NOW)
    assert first.create == [2] and first.requeue_after == pytest.approx(5.1)
    later = jobsync.plan(job(status, **spec), [*pods, pod("Running", index=2)], NOW + timedelta(seconds=12))
    assert later.create == [0] and later.requeue_after == pytest.approx(3.1)
    assert jobsync.plan(job(status, **spec), pods, NOW + timedelta(seconds=16)).create == [0, 1, 2]


def test_max_failed_indexes_and_fail_index_rule() -> None:
    spec = {"completionMode": "Indexed", "completions": 4, "parallelism": 4, "backoffLimitPerIndex": 3,
            "maxFailedIndexes": 0, "backoffLimit": 2**31 - 1,
            "podFailurePolicy": {"rules": [{"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [1]}}]}}
    plan = jobsync.plan(job({"startTime": timeutil.rfc3339(NOW)}, **spec), [_failed_index_pod(2, 0)],
                        NOW + timedelta(minutes=30))
    assert plan.status.failed_indexes == "2"
    assert conditions(plan)[0] == ("FailureTarget", "True", "MaxFailedIndexesExceeded")


@pytest.mark.parametrize(("rules", "completed", "matched"), [
    pytest.param([{"succeededIndexes": "0,2-3"}], "0,2,3", 0, id="all listed indexes"),
    pytest.param([{"succeededIndexes": "0,2-3"}], "0,2", None, id="one missing"),
    pytest.param([{"succeededCount": 2}], "1,4", 0, id="a count of any"),
    pytest.param([{"succeededIndexes": "0-2", "succeededCount": 3}, {"succeededCount": 1}], "4", 1,
                 id="second rule"),
])
def test_success_policy(rules: list[dict[str, Any]], completed: str, matched: int | None) -> None:
    running = pod("Running", index=1)
    spec = {"completionMode": "Indexed", "completions": 5, "parallelism": 5, "successPolicy": {"rules": rules}}
    plan = jobsync.plan(job({"startTime": timeutil.rfc3339(NOW), "completedIndexes": completed}, **spec), [running],
                        NOW)
    if matched is None:
        assert conditions(plan) == []
    else:
        assert conditions(plan) == [("SuccessCriteriaMet", "True", "SuccessPolicy")]
        assert plan.status.conditions[0].message == f"Matched rules at index {matched}"  # type: ignore[index]
        assert plan.delete == [running] and plan.create == []  # the lingering pods go
