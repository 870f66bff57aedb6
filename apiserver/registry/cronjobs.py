"""batch/v1 CronJobs: cronJobStrategy's defaults and validateCronJobSpec with kube's messages.

The schedule is checked with kubelab.cron (robfig's ParseStandard and its messages), the timeZone against
the zone database (time.LoadLocation), and the job template as a Job's spec without a selector
(`jobspec.py`).
"""

from __future__ import annotations

import re
import zoneinfo

from kubelab import cron, validation
from kubelab.models import CronJob, JobSpec, TypedObject
from kubelab.validation import FieldError, invalid, not_supported, required

from .jobspec import default_job_spec, nonnegative_field, selector_literal, validate_job_spec
from .pods import PodStrategy
from .strategy import Strategy

_TZ_PART = re.compile(r"[A-Za-z.\-_0-9+]{1,14}", re.ASCII)


def validate_time_zone(name: str | None, path: str) -> list[FieldError]:
    """validateTimeZone: IANA names only (no `Local`, no digits-first POSIX strings), known to the zone
    database, with time.LoadLocation's message otherwise."""
    if name is None:
        return []
    shown = name  # field.Error dereferences the *string it is given
    if name == "":
        return [invalid(path, shown, "timeZone must be nil or non-empty string")]
    for part in name.split("/"):
        if part in (".", "..") or part.startswith("-") or not _TZ_PART.fullmatch(part):
            return [invalid(path, shown, f"unknown time zone {name}")]
    errs: list[FieldError] = []
    if name.lower() == "local":
        errs.append(invalid(path, shown, "timeZone must be an explicit time zone as defined in "
                                         "https://www.iana.org/time-zones"))
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        errs.append(invalid(path, shown, f"unknown time zone {name}"))
    return errs


class CronJobStrategy(Strategy):
    """cronJobStrategy: defaults (concurrencyPolicy Allow, suspend false, history limits 3 and 1) and
    validateCronJobSpec."""
    status_zero = ()  # CronJobStatus: every field omitempty
    counts_spec_generation = True

    def __init__(self, rt, pods: PodStrategy) -> None:  # type: ignore[no-untyped-def]
        super().__init__(rt)
        self.pods = pods

    def set_defaults(self, obj: TypedObject) -> None:
        assert isinstance(obj, CronJob)
        spec = obj.spec
        if spec is None:
            return
        spec.concurrency_policy = spec.concurrency_policy or "Allow"
        if spec.suspend is None:
            spec.suspend = False
        if spec.successful_jobs_history_limit is None:
            spec.successful_jobs_history_limit = 3
        if spec.failed_jobs_history_limit is None:
            spec.failed_jobs_history_limit = 1
        template = spec.job_template
        if template is not None:
            if template.spec is None:
                template.spec = JobSpec()
            default_job_spec(template.spec, self.pods)

    def prepare_create(self, obj: TypedObject) -> None:
        super().prepare_create(obj)
        obj.status = None  # type: ignore[attr-defined]

    def validate_create(self, obj: TypedObject) -> list[FieldError]:
        assert isinstance(obj, CronJob)
        errs = self.validate_meta(obj) + self._validate_spec(obj, None)
        name = obj.metadata.name or ""
        if len(name) > 52:
            # The controller names its Jobs `<cronjob>-<minutes since the epoch>` (11 more characters).
            errs.append(invalid("metadata.name", name, "must be no more than 52 characters"))
        return errs

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        assert isinstance(new, CronJob) and isinstance(old, CronJob)
        errs = self.validate_meta_update(new, old)
        if subresource == "status":
            return errs
        return errs + self._validate_spec(new, old)

    def _validate_spec(self, cj: CronJob, old: CronJob | None) -> list[FieldError]:
        spec = cj.spec
        if spec is None:
            return [required("spec.schedule")]
        errs: list[FieldError] = []
        old_spec = old.spec if old is not None else None
        if not spec.schedule:
            errs.append(required("spec.schedule"))
        else:
            try:
                cron.parse(spec.schedule)
            except cron.CronError as exc:
                errs.append(invalid("spec.schedule", spec.schedule, str(exc)))
            allow_tz = old_spec is not None and "TZ" in (old_spec.schedule or "")
            if allow_tz and "TZ" in spec.schedule and spec.time_zone is not None:
                errs.append(invalid("spec.schedule", spec.schedule,
                                    "cannot use both timeZone field and TZ or CRON_TZ in schedule"))
            elif not allow_tz and "TZ" in spec.schedule:
                errs.append(invalid("spec.schedule", spec.schedule,
                                    "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"))
        errs += nonnegative_field("spec.startingDeadlineSeconds", spec.starting_deadline_seconds)
        if old_spec is None or old_spec.time_zone != spec.time_zone:
            errs += validate_time_zone(spec.time_zone, "spec.timeZone")
        policy = spec.concurrency_policy or ""
        if policy == "":
            errs.append(required("spec.concurrencyPolicy"))
        elif policy not in ("Allow", "Forbid", "Replace"):
            errs.append(not_supported("spec.concurrencyPolicy", policy, ["Allow", "Forbid", "Replace"]))
        template = spec.job_template
        job_spec = (template.spec if template else None) or JobSpec()
        errs += validate_job_spec(job_spec, "spec.jobTemplate.spec", self.pods)
        if job_spec.selector is not None:
            errs.append(invalid("spec.jobTemplate.spec.selector", selector_literal(job_spec.selector),
                                "`selector` will be auto-generated"))
        if job_spec.manual_selector:
            errs.append(not_supported("spec.jobTemplate.spec.manualSelector", validation.GoLiteral("true"),
                                      ["nil", "false"]))
        errs += nonnegative_field("spec.successfulJobsHistoryLimit", spec.successful_jobs_history_limit)
        errs += nonnegative_field("spec.failedJobsHistoryLimit", spec.failed_jobs_history_limit)
        return errs
