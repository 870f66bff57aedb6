"""The CronJob controller's pure decisions (controllers/cronjobsync.py) on a fake clock: which start time is
due, missed starts and startingDeadlineSeconds, concurrencyPolicy, job names, status bookkeeping, history."""

from __future__ import annotations

import zoneinfo
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controllers import cronjobsync
from kubelab import cron, timeutil
from kubelab.models import CronJob, Job

CREATED = datetime(2026, 1, 1, 10, 0, 30, tzinfo=UTC)


def cronjob(schedule: str = "*/5 * * * *", status: dict[str, Any] | None = None, **spec: Any) -> CronJob:
    body: dict[str, Any] = {"apiVersion": "batch/v1", "kind": "CronJob",
                            "metadata": {"name": "tick", "namespace": "default", "uid": "cj-uid",
                                         "creationTimestamp": timeutil.rfc3339(CREATED)},
                            "spec": {"schedule": schedule, "concurrencyPolicy": "Allow", "suspend": False,
                                     "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1,
                                     "jobTemplate": {"metadata": {"labels": {"team": "a"}},
                                                     "spec": {"template": {"spec": {"restartPolicy": "Never",
                                                                                    "containers": []}}}}, **spec}}
    if status is not None:
        body["status"] = status
    return CronJob.from_dict(body)


def job(name: str, uid: str, condition: str | None = None, *, start: str = "2026-01-01T10:05:00Z") -> Job:
    status: dict[str, Any] = {"startTime": start}
    if condition:
        status["conditions"] = [{"type": condition, "status": "True"}]
        if condition == "Complete":
            status["completionTime"] = "2026-01-01T10:06:00Z"
    return Job.from_dict({"metadata": {"name": name, "namespace": "default", "uid": uid}, "status": status})


@pytest.mark.parametrize(("now", "expected", "missed"), [
    pytest.param(CREATED + timedelta(minutes=2), None, "none", id="before the first start"),
    pytest.param(datetime(2026, 1, 1, 10, 5, 0, tzinfo=UTC), "2026-01-01T10:05:00Z", "none", id="exactly at it"),
    pytest.param(datetime(2026, 1, 1, 10, 17, 0, tzinfo=UTC), "2026-01-01T10:15:00Z", "few", id="missed two"),
    pytest.param(datetime(2026, 1, 2, 10, 0, 0, tzinfo=UTC), "2026-01-02T10:00:00Z", "many", id="a day: 288 missed"),
])
def test_most_recent_schedule_time(now: datetime, expected: str | None, missed: str) -> None:
    cj = cronjob()
    _, recent, kind = cronjobsync.most_recent_schedule_time(cj, now, cron.parse("*/5 * * * *"), None,
                                                             include_deadline=True)
    assert (timeutil.rfc3339(recent) if recent else None, kind) == (expected, missed)


def test_creates_the_job_of_the_most_recent_start_time() -> None:
    now = datetime(2026, 1, 1, 10, 17, 0, tzinfo=UTC)
    plan = cronjobsync.plan(cronjob(), [], now)
    assert plan.create is not None
    meta = plan.create["metadata"]
    # 10:15 UTC on 2026-01-01 is 29,454,375 minutes after the epoch.
    assert meta["name"] == "tick-29454375"
    assert meta["labels"] == {"team": "a"}
    assert meta["annotations"] == {"batch.kubernetes.io/cronjob-scheduled-timestamp": "2026-01-01T10:15:00Z"}
    assert meta["ownerReferences"][0]["kind"] == "CronJob" and meta["ownerReferences"][0]["controller"] is True
    assert plan.status.last_schedule_time == "2026-01-01T10:15:00Z"
    assert plan.requeue_after == pytest.approx(180.1)


def test_scheduled_timestamp_is_in_the_cronjob_zone() -> None:
    body = cronjobsync.job_from_template(cronjob(timeZone="Asia/Kolkata"), datetime(2026, 1, 1, 10, 15, tzinfo=UTC),
                                         zoneinfo.ZoneInfo("Asia/Kolkata"))
    assert body["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"] == \
        "2026-01-01T15:45:00+05:30"


def test_the_same_start_is_not_created_twice() -> None:
    now = datetime(2026, 1, 1, 10, 6, 0, tzinfo=UTC)
    cj = cronjob(status={"lastScheduleTime": "2026-01-01T10:05:00Z",
                         "active": [{"kind": "Job", "name": "tick-29454365", "uid": "j1"}]})
    assert cronjobsync.plan(cj, [job("tick-29454365", "j1")], now).create is None


def test_starting_deadline_and_too_late() -> None:
    now = datetime(2026, 1, 1, 10, 7, 0, tzinfo=UTC)
    plan = cronjobsync.plan(cronjob(startingDeadlineSeconds=60), [], now)
    assert plan.create is None  # 10:05 is two minutes ago: past the deadline, and no start since
    # Long outage: nothing older than the deadline is considered, so no "too many missed" warning either.
    later = cronjobsync.plan(cronjob(startingDeadlineSeconds=200), [], datetime(2026, 1, 5, 10, 2, tzinfo=UTC))
    assert later.create is not None and later.create["metadata"]["name"] == "tick-" + str(
        int(datetime(2026, 1, 5, 10, 0, tzinfo=UTC).timestamp()) // 60)
    assert not [e for e in later.events if e[1] == "TooManyMissedTimes"]


def test_too_many_missed_start_times_warns_and_still_starts_the_last() -> None:
    plan = cronjobsync.plan(cronjob(), [], datetime(2026, 1, 2, 10, 1, 0, tzinfo=UTC))
    assert ("Warning", "TooManyMissedTimes", ("too many missed start times. Set or decrease "
            ".spec.startingDeadlineSeconds or check clock skew")) in plan.events
    assert plan.create is not None


@pytest.mark.parametrize(("policy", "creates", "deletes"), [
    pytest.param("Allow", True, [], id="Allow"),
    pytest.param("Forbid", False, [], id="Forbid"),
    pytest.param("Replace", True, ["tick-29454365"], id="Replace"),
])
def test_concurrency_policy(policy: str, creates: bool, deletes: list[str]) -> None:
    running = job("tick-29454365", "j1")
    cj = cronjob(concurrencyPolicy=policy, status={"lastScheduleTime": "2026-01-01T10:05:00Z",
                                                   "active": [{"kind": "Job", "name": running.name, "uid": "j1"}]})
    plan = cronjobsync.plan(cj, [running], datetime(2026, 1, 1, 10, 10, 5, tzinfo=UTC))
    assert (plan.create is not None) == creates
    assert [j.name for j in plan.delete] == deletes
    if policy == "Forbid":
        assert plan.events == [("Normal", "JobAlreadyActive", ("Not starting job because prior execution is "
                                                              "running and concurrency policy is Forbid"))]


def test_finished_jobs_leave_active_and_set_last_successful_time() -> None:
    cj = cronjob(status={"lastScheduleTime": "2026-01-01T10:05:00Z",
                         "active": [{"kind": "Job", "name": "tick-29454365", "uid": "j1"},
                                    {"kind": "Job", "name": "gone", "uid": "j2"}]})
    plan = cronjobsync.plan(cj, [job("tick-29454365", "j1", "Complete")], datetime(2026, 1, 1, 10, 7, tzinfo=UTC))
    assert plan.status.active is None
    assert plan.status.last_successful_time == "2026-01-01T10:06:00Z"
    assert ("Normal", "SawCompletedJob", "Saw completed job: tick-29454365, condition: Complete") in plan.events
    assert ("Normal", "MissingJob", "Active job went missing: gone") in plan.events


def test_suspended_creates_nothing() -> None:
    assert cronjobsync.plan(cronjob(suspend=True), [], datetime(2026, 1, 1, 10, 17, tzinfo=UTC)).create is None


def test_history_limits_delete_the_oldest() -> None:
    jobs = [job(f"ok-{i}", f"o{i}", "Complete", start=f"2026-01-01T10:0{i}:00Z") for i in range(5)]
    jobs += [job(f"bad-{i}", f"b{i}", "Failed", start=f"2026-01-01T11:0{i}:00Z") for i in range(2)]
    jobs.append(job("running", "r"))
    assert [j.name for j in cronjobsync.history_to_delete(cronjob(), jobs)] == ["ok-0", "ok-1", "bad-0"]


def test_a_schedule_that_never_fires_is_reported() -> None:
    plan = cronjobsync.plan(cronjob("0 0 30 2 *"), [], datetime(2026, 1, 1, 10, 17, tzinfo=UTC))
    assert plan.create is None
    assert plan.events == [("Warning", "InvalidSchedule", ("invalid schedule: 0 0 30 2 * : time difference between "
                                                          "two schedules is less than 1 second"))]
