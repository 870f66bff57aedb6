"""A Job's pods as the Job controller reads and makes them (kube's pkg/controller/job helpers), as pure
functions: whether a pod is active, finished or counted failed and when it finished; completion indexes
and their "1,3-5" form; which podFailurePolicy rule a failed pod matches; the back-off before a
replacement (job-wide, or per index with backoffLimitPerIndex); and the pod a Job creates from its
template. `jobsync.plan` decides with them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from kubelab import timeutil, validation
from kubelab.models import Job, Pod

from .ownership import new_controller_ref

TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
INDEX_FAILURE_COUNT = "batch.kubernetes.io/job-index-failure-count"
INDEX_ENV = "JOB_COMPLETION_INDEX"
BACKOFF_BASE = 10.0
BACKOFF_MAX = 360.0


# --- pods: state and finish time ---------------------------------------------------------------

def is_finished(pod: Pod) -> bool:
    return pod.phase in ("Succeeded", "Failed")


def counts_as_failed(pod: Pod) -> bool:
    """A pod that failed, or one deleted before it succeeded (kube counts it failed once it is terminating
    with the finalizer still on it, as the job's podReplacementPolicy TerminatingOrFailed replaces it)."""
    if pod.phase == "Failed":
        return True
    return bool(pod.metadata.deletion_timestamp) and pod.phase != "Succeeded"


def is_active(pod: Pod) -> bool:
    return not is_finished(pod) and not pod.metadata.deletion_timestamp


def finish_time(pod: Pod) -> datetime | None:
    """When the pod finished: the latest finishedAt of its containers, else its deletion time."""
    latest: datetime | None = None
    for status in (pod.status.container_statuses if pod.status else None) or []:
        finished = timeutil.parse(((status.state or {}).get("terminated") or {}).get("finishedAt"))
        if finished is not None and (latest is None or finished > latest):
            latest = finished
    return latest or timeutil.parse(pod.metadata.deletion_timestamp)


def completion_index(pod: Pod) -> int | None:
    text = (pod.metadata.annotations or {}).get(COMPLETION_INDEX)
    if text is None or not validation.is_ascii_digits(text):
        return None
    return int(text)


def format_indexes(indexes: set[int]) -> str:
    """completedIndexes: ascending, three or more consecutive as `first-last`, two as `a,b` ("1,3-5,7")."""
    parts: list[str] = []
    ordered = sorted(indexes)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        if j - i >= 2:
            parts.append(f"{ordered[i]}-{ordered[j]}")
        else:
            parts.extend(str(n) for n in ordered[i:j + 1])
        i = j + 1
    return ",".join(parts)


def parse_indexes(text: str | None, *, limit: int) -> set[int]:
    """The indexes of a completedIndexes text below `limit` (the Job's completions): a status written by
    hand with "0-999999999" costs no more than the Job's own size."""
    result: set[int] = set()
    for part in (text or "").split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        if validation.is_ascii_digits(low) and (not high or validation.is_ascii_digits(high)):
            result.update(range(int(low), min(int(high or low), limit - 1) + 1))
    return result


# --- pod failure policy --------------------------------------------------------------------------

@dataclass(frozen=True)
class PolicyMatch:
    action: str  # FailJob | Ignore | Count
    message: str


def _exit_codes(pod: Pod, container: str | None) -> list[tuple[str, int]]:
    """The non-zero exit codes of the pod's (named) containers and init containers."""
    status = pod.status
    statuses = list((status.container_statuses if status else None) or [])
    statuses += list((status.init_container_statuses if status else None) or [])
    codes = []
    for s in statuses:
        if container is not None and s.name != container:
            continue
        code = ((s.state or {}).get("terminated") or {}).get("exitCode")
        if isinstance(code, int) and code != 0:
            codes.append((str(s.name), code))
    return codes


def match_failure_policy(job: Job, pod: Pod) -> PolicyMatch | None:
    """matchPodFailurePolicy: the first rule a failed pod satisfies. Exit-code rules look at the non-zero
    exit codes of the (named) containers; condition rules at the pod's conditions (DisruptionTarget...)."""
    policy = job.spec.pod_failure_policy if job.spec else None
    if policy is None:
        return None
    pod_ref = f"{pod.metadata.namespace}/{pod.metadata.name}"
    for index, rule in enumerate(policy.rules or []):
        req = rule.on_exit_codes
        if req is not None:
            values = set(req.values or [])
            for container, code in _exit_codes(pod, req.container_name):
                if (req.operator == "In") == (code in values):
                    return PolicyMatch(rule.action or "", f"Container {container} for pod {pod_ref} failed with exit "
                                                          f"code {code} matching {rule.action} rule at index {index}")
        for pattern in rule.on_pod_conditions or []:
            cond = pod.condition(pattern.type or "")
            if cond is not None and cond.status == (pattern.status or "True"):
                return PolicyMatch(rule.action or "", f"Pod {pod_ref} has condition {pattern.type} matching "
                                                      f"{rule.action} rule at index {index}")
    return None


# --- back-off --------------------------------------------------------------------------------------

def _backoff_delay(failures: int) -> float:
    """getRemainingTimeForFailuresCount's delay: 10 s doubled per failure after the first, at most 6 min."""
    return float(min(BACKOFF_BASE * 2.0 ** (failures - 1), BACKOFF_MAX))


def backoff_remaining(pods: list[Pod], now: datetime) -> float:
    """Seconds before a replacement may be created: 10 s * 2^(n-1) (at most 6 min) after the last of the
    n failures since the last success, as kube's backoff store computes it from finish times."""
    finished = [(finish_time(p), p) for p in pods if is_finished(p) or counts_as_failed(p)]
    ordered = sorted(((t, p) for t, p in finished if t is not None), key=lambda item: item[0])
    failures = 0
    last: datetime | None = None
    for when, pod in ordered:
        if pod.phase == "Succeeded":
            failures, last = 0, None
        else:
            failures, last = failures + 1, when
    if failures == 0 or last is None:
        return 0.0
    return max(0.0, (last + timedelta(seconds=_backoff_delay(failures)) - now).total_seconds())


def index_backoff_remaining(pods: list[Pod], now: datetime) -> dict[int, float]:
    """backoffLimitPerIndex: seconds before each index that failed may get its replacement
    (getRemainingTimePerIndex). An index's back-off counts its own failures only: those its last failed pod
    carries in `batch.kubernetes.io/job-index-failure-count`, plus that pod's, from when it finished; the
    other indexes' failures do not delay it. Indexes absent from the result may be created now."""
    last: dict[int, tuple[datetime, Pod]] = {}
    for pod in pods:
        index = completion_index(pod)
        when = finish_time(pod) if index is not None and counts_as_failed(pod) else None
        if index is not None and when is not None and (index not in last or when > last[index][0]):
            last[index] = (when, pod)
    remaining: dict[int, float] = {}
    for index, (when, pod) in last.items():
        text = (pod.metadata.annotations or {}).get(INDEX_FAILURE_COUNT, "0")
        failures = (int(text) if validation.is_ascii_digits(text) else 0) + 1
        wait = (when + timedelta(seconds=_backoff_delay(failures)) - now).total_seconds()
        if wait > 0:
            remaining[index] = wait
    return remaining


# --- the pod a Job creates ---------------------------------------------------------------------

def index_failures(pods: list[Pod]) -> dict[int, int]:
    """backoffLimitPerIndex: the failures of each index so far. Each replacement carries the count of its
    predecessors in `batch.kubernetes.io/job-index-failure-count`, so a failed pod stands for that plus one."""
    counts: dict[int, int] = {}
    for pod in pods:
        index = completion_index(pod)
        if index is None or not counts_as_failed(pod) or not (is_finished(pod) or pod.metadata.deletion_timestamp):
            continue
        text = (pod.metadata.annotations or {}).get(INDEX_FAILURE_COUNT, "0")
        before = int(text) if validation.is_ascii_digits(text) else 0
        counts[index] = max(counts.get(index, 0), before + 1)
    return counts


def failed_indexes(job: Job, pods: list[Pod]) -> set[int]:
    """The indexes that failed for good: more failures than backoffLimitPerIndex, or a FailIndex rule."""
    spec = job.spec
    limit = spec.backoff_limit_per_index if spec else None
    completions = (spec.completions if spec else None) or 0
    if limit is None:
        return set()
    failed = parse_indexes(job.status.failed_indexes if job.status else None, limit=completions)
    failed |= {i for i, n in index_failures(pods).items() if n > limit and i < completions}
    for pod in pods:
        index = completion_index(pod)
        if index is not None and index < completions and pod.phase == "Failed":
            match = match_failure_policy(job, pod)
            if match is not None and match.action == "FailIndex":
                failed.add(index)
    return failed


def pod_from_template(job: Job, index: int | None, *, failures: int = 0) -> dict[str, Any]:
    """The pod kube's job controller creates: the template with the tracking finalizer and the Job as
    controller; for an Indexed Job the index in annotation, label, env and hostname (and, with
    backoffLimitPerIndex, the index's failures so far)."""
    template = job.spec.template if job.spec else None
    meta = (template.metadata.to_dict() if template and template.metadata else {})
    spec = template.spec.to_dict() if template and template.spec else {}
    name = job.metadata.name or ""
    metadata: dict[str, Any] = {"generateName": f"{name}-", "namespace": job.metadata.namespace,
                                "ownerReferences": [new_controller_ref(job).to_dict()],
                                "labels": dict(meta.get("labels") or {}),
                                "annotations": dict(meta.get("annotations") or {}),
                                "finalizers": list(meta.get("finalizers") or []) + [TRACKING_FINALIZER]}
    if index is not None:
        metadata["generateName"] = f"{name}-{index}-"
        metadata["annotations"][COMPLETION_INDEX] = str(index)
        metadata["labels"][COMPLETION_INDEX] = str(index)
        if job.spec is not None and job.spec.backoff_limit_per_index is not None:
            metadata["annotations"][INDEX_FAILURE_COUNT] = str(failures)
        spec.setdefault("hostname", f"{name}-{index}")
        env = {"name": INDEX_ENV, "valueFrom": {"fieldRef": {
            "fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}}}
        for group in ("initContainers", "containers"):
            for container in spec.get(group) or []:
                if not any(e.get("name") == INDEX_ENV for e in container.get("env") or []):
                    container["env"] = [env, *(container.get("env") or [])]
    for key in ("labels", "annotations"):
        if not metadata[key]:
            del metadata[key]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
