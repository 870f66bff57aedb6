"""The CronJob controller's decisions, as pure functions (kube's pkg/controller/cronjob, controller v2).

`most_recent_schedule_time` is kube's: from the last schedule time (or the CronJob's creation), the latest
start time not after now, and whether a few or many (more than 100) were missed; with
`startingDeadlineSeconds` nothing older than now minus the deadline counts. `plan(cronjob, jobs, now)`
returns what one sync does: the `status.active` list brought up to date with the Jobs that finished or
went missing, `lastSuccessfulTime`, the Job to create (named `<cronjob>-<minutes since the epoch>`,
so that one start time can never create two), the Jobs to delete (concurrencyPolicy Replace, history
limits), the events kube records, and when to look again. No clock, no I/O.
"""

from __future__ import annotations

import zoneinfo
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

from kubelab import cron, timeutil
from kubelab.models import CronJob, CronJobStatus, Job, ObjectReference

from .ownership import new_controller_ref

SCHEDULED_TIMESTAMP = "batch.kubernetes.io/cronjob-scheduled-timestamp"
MANY_MISSED = 100
# nextScheduleDelta: wake up a little after the start time (clock skew).
NEXT_SCHEDULE_DELTA = 0.1


def is_finished(job: Job) -> tuple[bool, str]:
    """(finished, "Complete" | "Failed" | "")."""
    for cond in (job.status.conditions if job.status else None) or []:
        if cond.type in ("Complete", "Failed") and cond.status == "True":
            return True, cond.type
    return False, ""


def most_recent_schedule_time(cj: CronJob, now: datetime, schedule: cron.Schedule, zone: zoneinfo.ZoneInfo | None,
                              *, include_deadline: bool) -> tuple[datetime, datetime | None, str]:
    """(earliest time considered, the most recent start time not after now or None, "none"|"few"|"many").
    Raises ValueError for a schedule that never fires or fires twice in the same second ("59 23 31 2 *")."""
    earliest = timeutil.parse(cj.status.last_schedule_time if cj.status else None) or \
        timeutil.parse(cj.metadata.creation_timestamp) or now
    deadline = cj.spec.starting_deadline_seconds if cj.spec else None
    if include_deadline and deadline is not None:
        earliest = max(earliest, now - timedelta(seconds=deadline))
    t1 = cron.next_time(schedule, earliest, zone)
    t2 = cron.next_time(schedule, t1, zone) if t1 is not None else None
    if t1 is None or t2 is None:
        # robfig's Next gives the zero time for a schedule that never fires ("0 0 30 2 *"); kube then finds
        # no time between two starts and says so.
        raise ValueError("time difference between two schedules is less than 1 second")
    if now < t1:
        return earliest, None, "none"
    if now < t2:
        return earliest, t1, "none"
    between = round((t2 - t1).total_seconds())
    if between < 1:
        raise ValueError("time difference between two schedules is less than 1 second")
    missed = int((now - t1).total_seconds()) // between + 1
    # Start from an estimate and let the schedule find the exact last time (irregular schedules such as
    # "30 6-16/4 * * 1-5" have uneven gaps).
    potential = t1 + timedelta(seconds=(missed - 2) * between)
    most_recent: datetime | None = None
    t = cron.next_time(schedule, potential, zone)
    while t is not None and t <= now:
        most_recent = t
        t = cron.next_time(schedule, t, zone)
    kind = "many" if missed > MANY_MISSED else "few" if missed > 0 else "none"
    return earliest, most_recent, kind


def next_schedule_delay(cj: CronJob, now: datetime, schedule: cron.Schedule, zone: zoneinfo.ZoneInfo | None
                        ) -> float | None:
    """nextScheduleTimeDuration: seconds until the next start time after the most recent one (+100 ms)."""
    try:
        earliest, recent, missed = most_recent_schedule_time(cj, now, schedule, zone, include_deadline=False)
        base = recent or (earliest if missed == "none" else now)
    except ValueError:
        base = now
    following = cron.next_time(schedule, base, zone)
    if following is None:
        return None
    return (following - now).total_seconds() + NEXT_SCHEDULE_DELTA


def job_name(cj: CronJob, scheduled: datetime) -> str:
    """getJobName: the start time in minutes since the epoch, so a start time maps to one name."""
    return f"{cj.metadata.name}-{int(scheduled.timestamp()) // 60}"


def job_from_template(cj: CronJob, scheduled: datetime, zone: zoneinfo.ZoneInfo | None) -> dict[str, Any]:
    """getJobFromTemplate2: the template's labels and annotations, the scheduled time annotation (RFC 3339 in
    the CronJob's zone), the CronJob as controller, the template's spec."""
    template = cj.spec.job_template if cj.spec else None
    meta = template.metadata.to_dict() if template and template.metadata else {}
    annotations = dict(meta.get("annotations") or {})
    local = scheduled.astimezone(zone or UTC)
    # Go's time.RFC3339: `Z` for a zero offset, else `+hh:mm`.
    stamp = local.isoformat(timespec="seconds")
    annotations[SCHEDULED_TIMESTAMP] = stamp[:-6] + "Z" if local.utcoffset() == timedelta(0) else stamp
    metadata: dict[str, Any] = {"name": job_name(cj, scheduled), "namespace": cj.metadata.namespace,
                                "annotations": annotations,
                                "ownerReferences": [new_controller_ref(cj).to_dict()]}
    if meta.get("labels"):
        metadata["labels"] = dict(meta["labels"])
    spec = template.spec.to_dict() if template and template.spec else {}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec}


def job_ref(job: Job) -> ObjectReference:
    return ObjectReference(kind="Job", namespace=job.metadata.namespace, name=job.metadata.name,
                           uid=job.metadata.uid, api_version="batch/v1", resource_version=job.metadata.resource_version)


@dataclass
class Plan:
    status: CronJobStatus = field(default_factory=CronJobStatus)
    create: dict[str, Any] | None = None  # the Job to create
    scheduled: datetime | None = None
    delete: list[Job] = field(default_factory=list)  # Replace: the active Jobs it replaces
    events: list[tuple[str, str, str]] = field(default_factory=list)
    requeue_after: float | None = None


def plan(cj: CronJob, jobs: list[Job], now: datetime) -> Plan:
    """One sync of `cj` over the Jobs it controls. Pure."""
    spec = cj.spec
    assert spec is not None
    old = cj.status or CronJobStatus()
    active = list(old.active or [])
    last_success = old.last_successful_time
    result = Plan()
    active_uids = {ref.uid for ref in active}
    listed = {job.metadata.uid for job in jobs}
    for job in jobs:
        finished, how = is_finished(job)
        if job.metadata.uid not in active_uids and not finished:
            result.events.append(("Warning", "UnexpectedJob",
                                  f"Saw a job that the controller did not create or forgot: {job.metadata.name}"))
        elif job.metadata.uid in active_uids and finished:
            active = [ref for ref in active if ref.uid != job.metadata.uid]
            result.events.append(("Normal", "SawCompletedJob",
                                  f"Saw completed job: {job.metadata.name}, condition: {how}"))
        if finished and how == "Complete":
            completion = job.status.completion_time if job.status else None
            if completion and (last_success is None or completion > last_success):
                last_success = completion
    for ref in list(active):
        if ref.uid not in listed:
            active = [r for r in active if r.uid != ref.uid]
            result.events.append(("Normal", "MissingJob", f"Active job went missing: {ref.name}"))
    result.status = CronJobStatus(active=active or None, last_schedule_time=old.last_schedule_time,
                                  last_successful_time=last_success)
    if cj.metadata.deletion_timestamp:
        return result
    try:
        zone = cron.load_zone(spec.time_zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError) as exc:
        result.events.append(("Warning", "UnknownTimeZone", f"invalid timeZone: {spec.time_zone!r}: {exc}"))
        return result
    try:
        schedule = cron.parse(spec.schedule or "")
    except cron.CronError as exc:
        result.events.append(("Warning", "UnparseableSchedule", f"unparseable schedule: \"{spec.schedule}\" : {exc}"))
        return result
    result.requeue_after = next_schedule_delay(cj, now, schedule, zone)
    if spec.suspend:
        return result
    try:
        _, scheduled, missed = most_recent_schedule_time(cj, now, schedule, zone, include_deadline=True)
    except ValueError as exc:
        result.events.append(("Warning", "InvalidSchedule", f"invalid schedule: {spec.schedule} : {exc}"))
        return result
    if scheduled is None:
        return result
    if missed == "many":
        result.events.append(("Warning", "TooManyMissedTimes", ("too many missed start times. Set or decrease "
                                                               ".spec.startingDeadlineSeconds or check clock skew")))
    deadline = spec.starting_deadline_seconds
    if deadline is not None and scheduled + timedelta(seconds=deadline) < now:
        result.events.append(("Warning", "MissSchedule", ("Missed scheduled time to start a job: "
                                                         f"{format_datetime(scheduled.astimezone(UTC))}")))
        return result
    name = job_name(cj, scheduled)
    if any(ref.name == name for ref in active) or timeutil.parse(old.last_schedule_time) == scheduled:
        return result
    if spec.concurrency_policy == "Forbid" and active:
        result.events.append(("Normal", "JobAlreadyActive", ("Not starting job because prior execution is running "
                                                            "and concurrency policy is Forbid")))
        return result
    if spec.concurrency_policy == "Replace":
        by_uid = {job.metadata.uid: job for job in jobs}
        result.delete = [by_uid[ref.uid] for ref in active if ref.uid in by_uid]
        active = []
    result.create = job_from_template(cj, scheduled, zone)
    result.scheduled = scheduled
    result.status = CronJobStatus(active=active or None, last_schedule_time=timeutil.rfc3339(scheduled),
                                  last_successful_time=last_success)
    return result


def history_to_delete(cj: CronJob, jobs: list[Job]) -> list[Job]:
    """cleanupFinishedJobs: beyond successfulJobsHistoryLimit / failedJobsHistoryLimit, the oldest finished
    Jobs (by start time, then name) go."""
    spec = cj.spec
    if spec is None or (spec.successful_jobs_history_limit is None and spec.failed_jobs_history_limit is None):
        return []
    done: dict[str, list[Job]] = {"Complete": [], "Failed": []}
    for job in jobs:
        finished, how = is_finished(job)
        if finished:
            done[how].append(job)
    victims: list[Job] = []
    for how, limit in (("Complete", spec.successful_jobs_history_limit), ("Failed", spec.failed_jobs_history_limit)):
        if limit is None or len(done[how]) <= limit:
            continue
        ordered = sorted(done[how], key=lambda j: (
            (j.status.start_time if j.status else None) is None,
            (j.status.start_time if j.status else None) or "", j.metadata.name or ""))
        victims += ordered[:len(ordered) - limit]
    return victims
