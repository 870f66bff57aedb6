"""The Job controller: run a Job's pods to completion (kube's pkg/controller/job), and the TTL-after-finished
controller that deletes finished Jobs.

Each sync reads the Job and the pods it controls from the shared informers, asks `jobsync.plan` what to
do, and does it in kube's order: record newly finished pods in `status.uncountedTerminatedPods`, remove
their `batch.kubernetes.io/job-tracking` finalizers, write the counted status; delete and create pods
(creations in slow-start batches, under expectations so a burst of syncs does not create twice). Pods are
claimed as the ReplicaSet controller claims them (orphans matching the selector adopted).
A finished Job with `ttlSecondsAfterFinished` is deleted that many seconds after its Complete or Failed
condition, with Foreground propagation and its UID as precondition (kube's ttlafterfinished controller).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from kubelab import kinds, timeutil
from kubelab.client import ApiClient, ApiError, Conflict, NotFound, WorkQueue
from kubelab.events import EventRecorder
from kubelab.models import Job, JobStatus, Pod
from kubelab.selectors import SelectorError, selector_from_label_selector

from . import jobpods, jobsync
from .expectations import Expectations
from .informers import SharedInformers
from .ownership import SMP, claim_all, controller_ref
from .queuecontroller import QueueController
from .replicaset import slow_start_batches

log = logging.getLogger(__name__)
ORPHAN_POD = "orphan-pod:"  # queue keys of pods whose Job is gone


def ttl_remaining(job: Job, now: Any) -> float | None:
    """Seconds until a finished Job with ttlSecondsAfterFinished may be deleted (<= 0: now); None if it
    has no TTL or has not finished. The clock starts at the terminal condition's transition."""
    ttl = job.spec.ttl_seconds_after_finished if job.spec else None
    if ttl is None or job.metadata.deletion_timestamp:
        return None
    for cond in (job.status.conditions if job.status else None) or []:
        if cond.type in ("Complete", "Failed") and cond.status == "True":
            finished = timeutil.parse(cond.last_transition_time) or now
            return float((finished + timedelta(seconds=ttl) - now).total_seconds())
    return None


class JobController(QueueController):
    name = "job-controller"

    def __init__(self, api: ApiClient, informers: SharedInformers) -> None:
        self.api = api
        self.jobs = informers.jobs
        self.informers = informers
        self.queue = WorkQueue(self.name)
        self.expectations = Expectations()
        self.finalizers_removed: dict[str, set[str]] = {}
        self.events = EventRecorder(api, self.name)
        self.jobs.add_handler(self._on_job)
        informers.pods.add_handler(self._on_pod)

    def initial_keys(self) -> Iterable[str]:
        return list(self.jobs.cache)

    # handlers: enqueue, lower expectations

    def _on_job(self, event: str, old: Job | None, new: Job | None) -> None:
        job = new or old
        assert job is not None
        if new is None:
            self.expectations.forget(job.key)
            self.finalizers_removed.pop(job.key, None)
        self.queue.add(job.key)

    def _owner_key(self, pod: Pod) -> str | None:
        ref = controller_ref(pod)
        if ref is None or ref.kind != "Job":
            return None
        job = self.jobs.get(f"{pod.metadata.namespace}/{ref.name}")
        return job.key if job is not None and job.metadata.uid == ref.uid else None

    def _on_pod(self, event: str, old: Pod | None, new: Pod | None) -> None:
        pod = new or old
        assert pod is not None
        key = self._owner_key(pod)
        if key is None:
            if new is not None and jobpods.TRACKING_FINALIZER in (new.metadata.finalizers or []):
                # Its Job is gone (deleted, or replaced by one of the same name): nobody would ever
                # remove the finalizer, and a deleted pod would stay Terminating (kube's syncOrphanPod).
                self.queue.add(ORPHAN_POD + new.key)
            return
        if new is None or jobpods.TRACKING_FINALIZER not in (new.metadata.finalizers or []):
            self.finalizers_removed.get(key, set()).discard(pod.metadata.uid or "")
        if old is None and new is not None:
            self.expectations.creation_observed(key)
        elif new is None or (new.metadata.deletion_timestamp and old is not None
                             and not old.metadata.deletion_timestamp):
            self.expectations.deletion_observed(key, pod.key)
        self.queue.add(key)

    # sync

    async def reconcile(self, key: str) -> None:
        if key.startswith(ORPHAN_POD):
            await self._release_orphan(key[len(ORPHAN_POD):])
            return
        job = self.jobs.get(key)
        if job is None:
            self.expectations.forget(key)
            return
        if job.spec is None or job.metadata.deletion_timestamp:
            return
        managed_by = job.spec.managed_by
        if managed_by not in (None, "kubernetes.io/job-controller"):
            return  # JobManagedBy: another controller's Job
        try:
            selector = selector_from_label_selector(job.spec.selector)
        except SelectorError as exc:
            log.warning("job %s: invalid selector: %s", key, exc)
            return
        now = timeutil.now()
        remaining = ttl_remaining(job, now)
        if jobsync.is_job_finished(job) and remaining is not None:
            if remaining <= 0:
                await self._delete_finished(job)
                return
            self.queue.add_after(key, remaining + 0.5)
        pods = [p for p in self.informers.pods_in(job.metadata.namespace or "")]
        owned = await claim_all(self.api, job, kinds.JOBS, pods, kinds.PODS,
                                lambda pod: selector.matches(pod.metadata.labels) and
                                (jobpods.is_active(pod) or controller_ref(pod) is not None), what="pods")
        removed = frozenset(self.finalizers_removed.get(key, set()))
        decision = jobsync.plan(job, owned, now, finalizers_removed=removed)
        if not self.expectations.satisfied(key):
            decision.create, decision.delete = [], []
        if decision.interim_status is not None:
            job = await self._write_status(job, decision.interim_status) or job
        if decision.remove_finalizer:
            await self._remove_finalizers(key, decision.remove_finalizer)
        for event_type, reason, message in decision.events:
            self.events.event(job, event_type, reason, message)
        written = await self._write_status(job, decision.status)
        if written is not None and decision.finished:
            after = ttl_remaining(written, timeutil.now())
            if after is not None:
                self.queue.add_after(key, max(0.0, after) + 0.5)
        await self._delete_pods(job, decision.delete)
        await self._create_pods(job, decision.create, decision.index_failures)
        if decision.requeue_after is not None:
            self.queue.add_after(key, decision.requeue_after)

    async def _release_orphan(self, pod_key: str) -> None:
        """syncOrphanPod: the tracking finalizer goes from a pod whose Job no longer exists."""
        namespace, _, name = pod_key.partition("/")
        pod = next((p for p in self.informers.pods_in(namespace) if p.metadata.name == name), None)
        if pod is None or self._owner_key(pod) is not None:
            return
        ref = controller_ref(pod)
        if ref is not None and (ref.kind != "Job" or ref.api_version != "batch/v1"):
            return  # another kind of controller's pod: its finalizers are its own business
        if ref is not None:
            try:  # the cache may be behind the Job's creation: ask the API before letting go
                live: Job = await self.api.get(kinds.JOBS, ref.name or "", namespace)
                if live.metadata.uid == ref.uid:
                    return
            except NotFound:
                pass
        await self._remove_finalizers("", [pod])

    async def _remove_finalizers(self, key: str, pods: list[Pod]) -> None:
        removed = self.finalizers_removed.setdefault(key, set()) if key else set()

        async def remove(pod: Pod) -> None:
            patch = {"metadata": {"$deleteFromPrimitiveList/finalizers": [jobpods.TRACKING_FINALIZER]}}
            try:
                await self.api.patch(kinds.PODS, pod.metadata.name or "", patch, pod.metadata.namespace,
                                     content_type=SMP)
            except NotFound:
                pass
            removed.add(pod.metadata.uid or "")

        results = await asyncio.gather(*(remove(p) for p in pods), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]

    async def _write_status(self, job: Job, status: JobStatus) -> Job | None:
        if not jobsync.status_changed(job, status):
            return job
        try:
            written: Job = await self.api.update_status(kinds.JOBS, job.model_copy(update={"status": status}))
            return written
        except NotFound:
            return None
        # A Conflict means the cache was behind: it propagates, and the key is synced again from a fresh
        # view (nothing was counted from this one).

    async def _create_pods(self, job: Job, indexes: list[int | None], failures: dict[int, int]) -> None:
        if not indexes:
            return
        key = job.key
        self.expectations.expect_creations(key, len(indexes))
        pending = list(indexes)
        created = 0
        error: BaseException | None = None
        for size in slow_start_batches(len(pending)):
            batch, pending = pending[:size], pending[size:]
            results = await asyncio.gather(*(self._create_pod(job, i, failures.get(i, 0) if i is not None else 0)
                                             for i in batch), return_exceptions=True)
            errors = [r for r in results if isinstance(r, BaseException)]
            created += size - len(errors)
            if errors:
                error = errors[0]
                break
        for _ in range(len(indexes) - created):
            self.expectations.creation_observed(key)
        if error is not None:
            raise error

    async def _create_pod(self, job: Job, index: int | None, failures: int) -> None:
        try:
            pod = await self.api.create(kinds.PODS, jobpods.pod_from_template(job, index, failures=failures),
                                        job.metadata.namespace)
        except ApiError as exc:
            if exc.code == 403 and "is being terminated" in exc.message:
                return
            self.events.event(job, "Warning", "FailedCreate", f"Error creating: {exc.message}")
            raise
        self.events.event(job, "Normal", "SuccessfulCreate", f"Created pod: {pod.metadata.name}")

    async def _delete_pods(self, job: Job, pods: list[Pod]) -> None:
        if not pods:
            return
        self.expectations.expect_deletions(job.key, [p.key for p in pods])

        async def delete(pod: Pod) -> None:
            try:
                await self.api.delete(kinds.PODS, pod.metadata.name or "", pod.metadata.namespace)
            except NotFound:
                self.expectations.deletion_observed(job.key, pod.key)
                return
            except ApiError:
                self.expectations.deletion_observed(job.key, pod.key)
                raise
            self.events.event(job, "Normal", "SuccessfulDelete", f"Deleted pod: {pod.metadata.name}")

        results = await asyncio.gather(*(delete(p) for p in pods), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]

    async def _delete_finished(self, job: Job) -> None:
        """ttlafterfinished: re-read the Job, check again, delete it with Foreground propagation."""
        try:
            fresh: Job = await self.api.get(kinds.JOBS, job.metadata.name or "", job.metadata.namespace)
        except NotFound:
            return
        remaining = ttl_remaining(fresh, timeutil.now())
        if remaining is None or not jobsync.is_job_finished(fresh):
            return
        if remaining > 0:
            self.queue.add_after(fresh.key, remaining + 0.5)
            return
        log.info("job %s: deleting, %ss after it finished", fresh.key, fresh.spec.ttl_seconds_after_finished
                 if fresh.spec else None)
        try:
            await self.api.delete(kinds.JOBS, fresh.metadata.name or "", fresh.metadata.namespace,
                                  uid=fresh.metadata.uid, propagation_policy="Foreground")
        except (NotFound, Conflict):
            return
