"""batch/v1 kinds: Job and CronJob, with their specs, statuses and the pod failure policy."""

from __future__ import annotations

from .apps import PodTemplateSpec
from .base import Model
from .core import ObjectReference
from .meta import LabelSelector, ObjectMeta, TypedObject


class PodFailurePolicyOnExitCodesRequirement(Model):
    container_name: str | None = None
    operator: str | None = None
    values: list[int] | None = None


class PodFailurePolicyOnPodConditionsPattern(Model):
    type: str | None = None
    status: str | None = None


class PodFailurePolicyRule(Model):
    action: str | None = None
    on_exit_codes: PodFailurePolicyOnExitCodesRequirement | None = None
    on_pod_conditions: list[PodFailurePolicyOnPodConditionsPattern] | None = None


class PodFailurePolicy(Model):
    rules: list[PodFailurePolicyRule] | None = None


class SuccessPolicyRule(Model):
    succeeded_indexes: str | None = None
    succeeded_count: int | None = None


class SuccessPolicy(Model):
    rules: list[SuccessPolicyRule] | None = None


class JobSpec(Model):
    parallelism: int | None = None
    completions: int | None = None
    active_deadline_seconds: int | None = None
    pod_failure_policy: PodFailurePolicy | None = None
    success_policy: SuccessPolicy | None = None
    backoff_limit: int | None = None
    backoff_limit_per_index: int | None = None
    max_failed_indexes: int | None = None
    selector: LabelSelector | None = None
    manual_selector: bool | None = None
    template: PodTemplateSpec | None = None
    ttl_seconds_after_finished: int | None = None
    completion_mode: str | None = None
    suspend: bool | None = None
    pod_replacement_policy: str | None = None
    managed_by: str | None = None


class JobCondition(Model):
    type: str | None = None
    status: str | None = None
    last_probe_time: str | None = None
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


class UncountedTerminatedPods(Model):
    succeeded: list[str] | None = None
    failed: list[str] | None = None


class JobStatus(Model):
    conditions: list[JobCondition] | None = None
    start_time: str | None = None
    completion_time: str | None = None
    active: int | None = None
    succeeded: int | None = None
    failed: int | None = None
    terminating: int | None = None
    completed_indexes: str | None = None
    failed_indexes: str | None = None
    uncounted_terminated_pods: UncountedTerminatedPods | None = None
    ready: int | None = None


class Job(TypedObject):
    spec: JobSpec | None = None
    status: JobStatus | None = None


class JobTemplateSpec(Model):
    metadata: ObjectMeta | None = None
    spec: JobSpec | None = None


class CronJobSpec(Model):
    schedule: str | None = None
    time_zone: str | None = None
    starting_deadline_seconds: int | None = None
    concurrency_policy: str | None = None
    suspend: bool | None = None
    job_template: JobTemplateSpec | None = None
    successful_jobs_history_limit: int | None = None
    failed_jobs_history_limit: int | None = None


class CronJobStatus(Model):
    active: list[ObjectReference] | None = None
    last_schedule_time: str | None = None
    last_successful_time: str | None = None


class CronJob(TypedObject):
    spec: CronJobSpec | None = None
    status: CronJobStatus | None = None
