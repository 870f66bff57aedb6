"""The CronJob controller: create a CronJob's Jobs on its schedule (kube's cronjob controller v2).

Each sync reads the CronJob and the Jobs it controls from the informers, asks `cronjobsync.plan`, deletes
the Jobs concurrencyPolicy Replace replaces, creates the Job of the most recent start time, writes the
status (active, lastScheduleTime, lastSuccessfulTime), trims the finished Jobs beyond the history limits
(Background propagation, as kube's), and requeues itself for the next start time. The clock is injected:
tests move it instead of waiting for a schedule.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime

from kubelab import kinds, timeutil
from kubelab.client import AlreadyExists, ApiClient, ApiError, NotFound, WorkQueue
from kubelab.events import EventRecorder
from kubelab.models import CronJob, CronJobStatus, Job, OwnerReference

from . import cronjobsync
from .informers import SharedInformers
from .ownership import controller_ref
from .queuecontroller import QueueController

log = logging.getLogger(__name__)


class CronJobController(QueueController):
    name = "cronjob-controller"

    def __init__(self, api: ApiClient, informers: SharedInformers, *, clock: Callable[[], datetime] = timeutil.now) -> None:
        self.api = api
        self.cronjobs = informers.cronjobs
        self.jobs = informers.jobs
        self.clock = clock
        self.queue = WorkQueue(self.name)
        self.events = EventRecorder(api, self.name)
        self.cronjobs.add_handler(self._on_cronjob)
        self.jobs.add_handler(self._on_job)

    def initial_keys(self) -> Iterable[str]:
        return list(self.cronjobs.cache)

    def _on_cronjob(self, event: str, old: CronJob | None, new: CronJob | None) -> None:
        self.queue.add((new or old).key)  # type: ignore[union-attr]

    def _on_job(self, event: str, old: Job | None, new: Job | None) -> None:
        job = new or old
        assert job is not None
        ref = controller_ref(job)
        if ref is not None and ref.kind == "CronJob":
            self.queue.add(f"{job.metadata.namespace}/{ref.name}")

    def _jobs_of(self, cj: CronJob) -> list[Job]:
        return [job for job in self.jobs.items() if job.metadata.namespace == cj.metadata.namespace
                and (controller_ref(job) or OwnerReference()).uid == cj.metadata.uid]

    async def reconcile(self, key: str) -> None:
        cj = self.cronjobs.get(key)
        if cj is None or cj.spec is None:
            return
        jobs = self._jobs_of(cj)
        now = self.clock()
        decision = cronjobsync.plan(cj, jobs, now)
        for event_type, reason, message in decision.events:
            self.events.event(cj, event_type, reason, message)
        for job in decision.delete:
            await self._delete_job(cj, job)
        status = decision.status
        if decision.create is not None:
            try:
                created: Job = await self.api.create(kinds.JOBS, decision.create, cj.metadata.namespace)
            except AlreadyExists:
                # Created by an earlier sync whose status write was lost: take it as this start's Job.
                created = await self.api.get(kinds.JOBS, decision.create["metadata"]["name"], cj.metadata.namespace)
            except ApiError as exc:
                self.events.event(cj, "Warning", "FailedCreate", f"Error creating job: {exc.message}")
                raise
            else:
                self.events.event(cj, "Normal", "SuccessfulCreate", f"Created job {created.metadata.name}")
            if not any(ref.uid == created.metadata.uid for ref in status.active or []):
                status.active = [*(status.active or []), cronjobsync.job_ref(created)]
        await self._write_status(cj, status)
        for job in cronjobsync.history_to_delete(cj, jobs):
            await self._delete_job(cj, job)
        if decision.requeue_after is not None:
            self.queue.add_after(key, max(0.0, decision.requeue_after))

    async def _write_status(self, cj: CronJob, status: CronJobStatus) -> None:
        if (cj.status or CronJobStatus()).to_dict() == status.to_dict():
            return
        try:
            await self.api.update_status(kinds.CRONJOBS, cj.model_copy(update={"status": status}))
        except NotFound:
            return

    async def _delete_job(self, cj: CronJob, job: Job) -> None:
        try:
            await self.api.delete(kinds.JOBS, job.metadata.name or "", job.metadata.namespace,
                                  propagation_policy="Background")
        except NotFound:
            return
        self.events.event(cj, "Normal", "SuccessfulDelete", f"Deleted job {job.metadata.name}")
