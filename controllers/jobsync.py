"""The Job controller's decisions, as pure functions: what a sync of one Job should do.

kube's pkg/controller/job in pure form. `plan(job, pods, now)` reads the Job and the pods it owns and
returns a `Plan`: the pods to create (with their completion indexes), the pods to delete, the pods whose
`batch.kubernetes.io/job-tracking` finalizer may go, and the status to write. Finished pods are counted
the way kube counts them with finalizers: a pod that finished while still carrying the finalizer goes into
`status.uncountedTerminatedPods` first, then its finalizer is removed, then it moves into the
`succeeded`/`failed` counters; so no finished pod is counted twice or lost if the controller stops
between the steps (a pod that finished and lost its finalizer without being counted cannot happen, since
only this controller removes it, after recording it).

The rules, each as kube states them:
* parallelism: at most `parallelism` active pods, and no more than the completions still missing; a Job
  without completions (a work queue) creates no pod after one succeeded, and completes once one succeeded
  and none is active.
* Indexed: one pod per index in 0..completions-1 not yet succeeded, named `<job>-<index>-`, with the index in
  the annotation and label `batch.kubernetes.io/job-completion-index`, env JOB_COMPLETION_INDEX and
  hostname `<job>-<index>`; `status.completedIndexes` as "0-2,4,5".
* failure: more failed pods than backoffLimit (or, with restartPolicy OnFailure, as many container
  restarts as backoffLimit) -> BackoffLimitExceeded; active longer than activeDeadlineSeconds ->
  DeadlineExceeded; a pod matching a FailJob rule of podFailurePolicy -> PodFailurePolicy; a pod matching
  an Ignore rule is not counted. The Job first gets FailureTarget, its active pods are deleted, and once
  none is left it gets Failed (kube 1.31+: terminal conditions wait for the pods).
* success: SuccessCriteriaMet, then Complete (reason CompletionsReached) with completionTime.
* suspend: active pods deleted, condition Suspended; resuming sets it False and restarts startTime.
* back-off between retries: 10 s doubled per consecutive failure, at most 6 min, from the last failure.
No clock, no I/O: `now` is an argument.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from kubelab import timeutil
from kubelab.models import Job, JobCondition, JobStatus, Pod, UncountedTerminatedPods

from .jobpods import (
    TRACKING_FINALIZER,
    PolicyMatch,
    backoff_remaining,
    completion_index,
    counts_as_failed,
    failed_indexes,
    format_indexes,
    index_backoff_remaining,
    index_failures,
    is_active,
    is_finished,
    match_failure_policy,
    parse_indexes,
)

MAX_CREATE_PER_SYNC = 500


# --- the plan ------------------------------------------------------------------------------------

@dataclass
class Plan:
    create: list[int | None] = field(default_factory=list)  # one entry per pod: its index, or None
    index_failures: dict[int, int] = field(default_factory=dict)  # backoffLimitPerIndex: failures so far
    delete: list[Pod] = field(default_factory=list)
    remove_finalizer: list[Pod] = field(default_factory=list)
    # The status to write before removing finalizers (finished pods recorded as uncounted), if any.
    interim_status: JobStatus | None = None
    status: JobStatus = field(default_factory=JobStatus)
    requeue_after: float | None = None  # seconds, for back-off and activeDeadlineSeconds
    events: list[tuple[str, str, str]] = field(default_factory=list)  # (type, reason, message)
    finished: bool = False


def _condition(ctype: str, reason: str, message: str, now: datetime, status: str = "True") -> JobCondition:
    stamp = timeutil.rfc3339(now)
    return JobCondition(type=ctype, status=status, last_probe_time=stamp, last_transition_time=stamp,
                        reason=reason, message=message)


def _set_condition(conditions: list[JobCondition], new: JobCondition) -> list[JobCondition]:
    """A condition already there with the same status is kept as is (its transition time too)."""
    for i, cond in enumerate(conditions):
        if cond.type == new.type:
            if cond.status == new.status and cond.reason == new.reason:
                return conditions
            return conditions[:i] + [new] + conditions[i + 1:]
    return [*conditions, new]


def has_condition(job: Job, ctype: str) -> bool:
    return any(c.type == ctype and c.status == "True" for c in ((job.status.conditions if job.status else None) or []))


def is_job_finished(job: Job) -> bool:
    return has_condition(job, "Complete") or has_condition(job, "Failed")


def _finish_reason(job: Job) -> JobCondition | None:
    for cond in (job.status.conditions if job.status else None) or []:
        if cond.type in ("FailureTarget", "SuccessCriteriaMet") and cond.status == "True":
            return cond
    return None


def plan(job: Job, pods: list[Pod], now: datetime, *, finalizers_removed: frozenset[str] = frozenset()
         ) -> Plan:
    """One sync of `job` over the pods it controls. Pure. `finalizers_removed`: UIDs of pods whose finalizer
    this controller removed (and counted) but whose update its cache may not show yet (kube's
    finalizerExpectations): they are not counted again."""
    spec = job.spec
    assert spec is not None
    old = job.status or JobStatus()
    result = Plan()
    conditions = list(old.conditions or [])
    indexed = spec.completion_mode == "Indexed"
    uncounted = old.uncounted_terminated_pods or UncountedTerminatedPods()
    uncounted_ok, uncounted_failed = list(uncounted.succeeded or []), list(uncounted.failed or [])
    succeeded, failed = old.succeeded or 0, old.failed or 0
    completed = parse_indexes(old.completed_indexes, limit=spec.completions or 0) if indexed else set()

    # 1. Finished pods still carrying the finalizer are recorded as uncounted, then lose the finalizer.
    newly: list[Pod] = []
    fail_job: PolicyMatch | None = None
    for pod in pods:
        uid = pod.metadata.uid or ""
        tracked = TRACKING_FINALIZER in (pod.metadata.finalizers or []) and uid not in finalizers_removed
        if not tracked or uid in uncounted_ok or uid in uncounted_failed:
            if tracked and (uid in uncounted_ok or uid in uncounted_failed):
                result.remove_finalizer.append(pod)
            continue
        if pod.phase == "Succeeded":
            index = completion_index(pod)
            if indexed and (index is None or index in completed or index >= (spec.completions or 0)):
                result.remove_finalizer.append(pod)  # a duplicate or out-of-range index counts for nothing
                continue
            uncounted_ok.append(uid)
            newly.append(pod)
        elif counts_as_failed(pod) and (is_finished(pod) or pod.metadata.deletion_timestamp):
            match = match_failure_policy(job, pod) if pod.phase == "Failed" else None
            if match is not None and match.action == "Ignore":
                result.remove_finalizer.append(pod)
                continue
            if match is not None and match.action == "FailJob" and fail_job is None:
                fail_job = match
            uncounted_failed.append(uid)
            newly.append(pod)
    if newly:
        result.interim_status = old.model_copy(update={"uncounted_terminated_pods": UncountedTerminatedPods(
            succeeded=uncounted_ok, failed=uncounted_failed)})
        result.remove_finalizer.extend(newly)
    # 2. Once their finalizers are gone (this sync), uncounted pods move into the counters.
    by_uid = {p.metadata.uid: p for p in pods}
    for uid in uncounted_ok:
        succeeded += 1
        counted = by_uid.get(uid)
        index = completion_index(counted) if counted is not None else None
        if index is not None:
            completed.add(index)
    failed += len(uncounted_failed)
    if indexed:
        succeeded = len(completed)

    per_index = indexed and spec.backoff_limit_per_index is not None
    lost = failed_indexes(job, pods) - completed if per_index else set()
    active = [p for p in pods if is_active(p)]
    terminating = [p for p in pods if p.metadata.deletion_timestamp and not is_finished(p)]
    ready = sum(1 for p in active if p.is_ready())
    start_time = old.start_time
    suspended = bool(spec.suspend)
    finish = _finish_reason(job)

    # 3. Is the Job done, one way or the other?
    if finish is None and not is_job_finished(job):
        deadline = spec.active_deadline_seconds
        started = timeutil.parse(start_time)
        restarts = sum(s.restart_count or 0 for p in active
                       for s in ((p.status.container_statuses if p.status else None) or []))
        on_failure = bool(spec.template and spec.template.spec and spec.template.spec.restart_policy == "OnFailure")
        if fail_job is not None:
            finish = _condition("FailureTarget", "PodFailurePolicy", fail_job.message, now)
        elif failed > (spec.backoff_limit if spec.backoff_limit is not None else 6) or \
                (on_failure and spec.backoff_limit is not None and restarts >= spec.backoff_limit and restarts > 0):
            finish = _condition("FailureTarget", "BackoffLimitExceeded", "Job has reached the specified backoff limit",
                                now)
        elif per_index and spec.max_failed_indexes is not None and len(lost) > spec.max_failed_indexes:
            finish = _condition("FailureTarget", "MaxFailedIndexesExceeded",
                                "Job has exceeded the specified maximal number of failed indexes", now)
        elif per_index and lost and len(completed) + len(lost) >= (spec.completions or 0):
            finish = _condition("FailureTarget", "FailedIndexes", "Job has failed indexes", now)
        elif deadline is not None and started is not None and not suspended and \
                (now - started).total_seconds() >= deadline:
            finish = _condition("FailureTarget", "DeadlineExceeded", "Job was active longer than specified deadline",
                                now)
        elif (matched := _success_policy_rule(job, completed)) is not None:
            finish = _condition("SuccessCriteriaMet", "SuccessPolicy", f"Matched rules at index {matched}", now)
        elif _succeeded_enough(spec.completions, succeeded, len(active), indexed, completed):
            finish = _condition("SuccessCriteriaMet", "CompletionsReached", "Reached expected number of succeeded pods",
                                now)
        if finish is not None:
            conditions = _set_condition(conditions, finish)
            if finish.type == "FailureTarget":
                result.events.append(("Warning", finish.reason or "", finish.message or ""))
        elif deadline is not None and started is not None and not suspended:
            result.requeue_after = max(0.0, deadline - (now - started).total_seconds()) + 0.5

    if finish is not None or is_job_finished(job):
        # The Job is done: no new pods, the remaining active ones go; the terminal condition waits for them.
        result.delete = active
        if not active and not terminating and not is_job_finished(job) and finish is not None:
            final = "Failed" if finish.type == "FailureTarget" else "Complete"
            conditions = _set_condition(conditions, _condition(final, finish.reason or "", finish.message or "", now))
            result.finished = True
            if final == "Complete":
                result.events.append(("Normal", "Completed", "Job completed"))
        result.status = _status(old, conditions, start_time, active=[], ready=0, terminating=len(terminating),
                                succeeded=succeeded, failed=failed, completed=completed if indexed else None,
                                failed_indexes=format_indexes(lost) if per_index else None,
                                now=now if result.finished and finish is not None
                                and finish.type == "SuccessCriteriaMet" else None)
        return result

    # 4. Suspended: no pods, and the condition says so.
    if suspended:
        result.delete = active
        if not has_condition(job, "Suspended"):
            conditions = _set_condition(conditions, _condition("Suspended", "JobSuspended", "Job suspended", now))
            result.events.append(("Normal", "Suspended", "Job suspended"))
        result.status = _status(old, conditions, None, active=[], ready=0, terminating=len(terminating),
                                succeeded=succeeded, failed=failed, completed=completed if indexed else None,
                                failed_indexes=format_indexes(lost) if per_index else None)
        return result
    if has_condition(job, "Suspended"):
        conditions = _set_condition(conditions, _condition("Suspended", "JobResumed", "Job resumed", now, "False"))
        result.events.append(("Normal", "Resumed", "Job resumed"))
        start_time = None
    if start_time is None:
        start_time = timeutil.rfc3339(now)
        if spec.active_deadline_seconds is not None:
            result.requeue_after = spec.active_deadline_seconds + 0.5

    # 5. Create what is missing (after the back-off since the last failure).
    parallelism = spec.parallelism if spec.parallelism is not None else 1
    if spec.pod_replacement_policy == "Failed":
        # podReplacementPolicy Failed: a terminating pod is replaced only once it has fully stopped.
        active = active + terminating
    if indexed:
        busy = {completion_index(p) for p in active} | {completion_index(p) for p in terminating}
        room = min(max(0, parallelism - len(active)), MAX_CREATE_PER_SYNC)
        want: list[int | None] = []
        for i in range(spec.completions or 0):  # lazily: completions may be in the millions
            if len(want) >= room:
                break
            if i not in completed and i not in busy and i not in lost:
                want.append(i)
    elif spec.completions is None:
        want = [None] * (max(0, parallelism - len(active)) if succeeded == 0 else 0)
    else:
        missing = max(0, spec.completions - succeeded)
        want = [None] * max(0, min(parallelism, missing) - len(active))
        if len(active) > min(parallelism, missing):
            result.delete = active[min(parallelism, missing):]
    want = want[:MAX_CREATE_PER_SYNC]
    if want and per_index:
        # Each index waits out its own back-off; the ones that need not wait are created now (kube's
        # getPodCreationInfoForIndependentIndexes), and the sync comes back for the earliest of the others.
        waits = index_backoff_remaining(pods, now)
        held = [waits[i] for i in want if i in waits]
        want = [i for i in want if i not in waits]
        if held:
            result.requeue_after = min(result.requeue_after or min(held), min(held)) + 0.1
    elif want:
        wait = backoff_remaining(pods, now)
        if wait > 0:
            result.requeue_after = min(result.requeue_after or wait, wait) + 0.1
            want = []
    result.create = want
    if per_index:
        result.index_failures = index_failures(pods)
    result.status = _status(old, conditions, start_time, active=active, ready=ready, terminating=len(terminating),
                            succeeded=succeeded, failed=failed, completed=completed if indexed else None,
                                failed_indexes=format_indexes(lost) if per_index else None)
    return result


def _success_policy_rule(job: Job, completed: set[int]) -> int | None:
    """matchSuccessPolicy: the first rule the succeeded indexes satisfy (an Indexed Job only): all of its
    succeededIndexes, or succeededCount of them (of all indexes without succeededIndexes)."""
    spec = job.spec
    if spec is None or spec.success_policy is None or spec.completion_mode != "Indexed":
        return None
    for i, rule in enumerate(spec.success_policy.rules or []):
        wanted = None if rule.succeeded_indexes is None else parse_indexes(rule.succeeded_indexes,
                                                                           limit=spec.completions or 0)
        done = len(completed) if wanted is None else len(completed & wanted)
        if rule.succeeded_count is not None:
            if done >= rule.succeeded_count:
                return i
        elif wanted is not None and wanted <= completed:
            return i
    return None


def _succeeded_enough(completions: int | None, succeeded: int, active: int, indexed: bool,
                      completed: set[int]) -> bool:
    if indexed:
        return completions is not None and len(completed) >= completions
    if completions is None:
        return succeeded > 0 and active == 0
    return succeeded >= completions


def _status(old: JobStatus, conditions: list[JobCondition], start_time: str | None, *, active: list[Pod],
            ready: int, terminating: int, succeeded: int, failed: int, completed: set[int] | None,
            failed_indexes: str | None = None, now: datetime | None = None) -> JobStatus:
    return JobStatus(conditions=conditions or None, start_time=start_time,
                     completion_time=old.completion_time or (timeutil.rfc3339(now) if now is not None else None),
                     active=len(active) or None, ready=ready, terminating=terminating,
                     succeeded=succeeded or None, failed=failed or None,
                     completed_indexes=format_indexes(completed) if completed is not None else None,
                     failed_indexes=failed_indexes if failed_indexes is not None else old.failed_indexes,
                     uncounted_terminated_pods=UncountedTerminatedPods())


def status_changed(job: Job, status: JobStatus) -> bool:
    return (job.status or JobStatus()).to_dict() != status.to_dict()
