"""batch/v1 Jobs: defaults, the generated selector, validation with kube's messages.

A Job gets SetDefaults_Job's defaults (parallelism and completions 1, backoffLimit 6, completionMode
NonIndexed, suspend false, podReplacementPolicy) and, on create, jobStrategy's generated selector: unless
`manualSelector` is true, the pod template is labelled with the job's UID and name under both the
`batch.kubernetes.io/` keys and the legacy bare ones, and the selector matches
`batch.kubernetes.io/controller-uid` (kube 1.27+). The template's restartPolicy must be OnFailure or Never,
and the template, selector, completionMode and podFailurePolicy are immutable (ValidateJobSpecUpdate).
The spec's own defaults and checks live in `jobspec.py` (a CronJob's job template shares them); CronJobs
in `cronjobs.py`.
"""

from __future__ import annotations

import json
from typing import Any

from kubelab import validation
from kubelab.models import Job, JobSpec, LabelSelector, TypedObject
from kubelab.models.apps import PodTemplateSpec
from kubelab.selectors import SelectorError, selector_from_label_selector
from kubelab.validation import FieldError, invalid, required

from .. import requestctx
from .jobspec import (
    CONTROLLER_UID_LABEL,
    JOB_NAME_LABEL,
    LEGACY_CONTROLLER_UID_LABEL,
    LEGACY_JOB_NAME_LABEL,
    default_job_spec,
    dump,
    go_labels,
    nonnegative_field,
    selector_literal,
    template_literal,
    validate_job_spec,
)
from .pods import PodStrategy
from .strategy import Strategy


class JobStrategy(Strategy):
    """jobStrategy: the generated selector on create, kube's validation, generation on spec changes."""
    status_zero = ()  # JobStatus: every field omitempty
    counts_spec_generation = True

    name_check = staticmethod(validation.dns1123_subdomain_errors)
    # jobStrategy.DefaultGarbageCollectionPolicy: batch/v1 Jobs orphan their pods unless the DELETE asks
    # otherwise, for backward compatibility (kubectl asks for Background).
    default_gc_policy = "Orphan"

    def __init__(self, rt, pods: PodStrategy) -> None:  # type: ignore[no-untyped-def]
        super().__init__(rt)
        self.pods = pods

    def set_gc_finalizers(self, obj: TypedObject, options: dict[str, Any]) -> None:
        # The job REST storage's DELETE warns when it falls back to orphaning (pkg/registry/batch/job/storage).
        if options.get("propagationPolicy") is None and options.get("orphanDependents") is None:
            requestctx.warn("child pods are preserved by default when jobs are deleted; set "
                            "propagationPolicy=Background to remove them or set propagationPolicy=Orphan to "
                            "suppress this warning")
        super().set_gc_finalizers(obj, options)

    def set_defaults(self, obj: TypedObject) -> None:
        assert isinstance(obj, Job)
        if obj.spec is None:
            obj.spec = JobSpec()
        default_job_spec(obj.spec, self.pods)

    def prepare_create(self, obj: TypedObject) -> None:
        super().prepare_create(obj)
        assert isinstance(obj, Job) and obj.spec is not None
        obj.status = None
        spec = obj.spec
        if spec.manual_selector is None:
            spec.manual_selector = False
        if not spec.manual_selector:
            self._generate_selector(obj)
        # SetDefaults_Job: a Job without labels takes its template's (the generated ones included, as
        # kube-apiserver defaults again when it reads the stored object).
        template_labels = (spec.template.metadata.labels if spec.template and spec.template.metadata else None)
        if template_labels and not obj.metadata.labels:
            obj.metadata.labels = dict(template_labels)

    @staticmethod
    def _generate_selector(job: Job) -> None:
        """generateSelector: the job's UID and name on the template, under the batch.kubernetes.io keys and
        the legacy ones (a label the user set is kept), and a selector on the UID."""
        spec = job.spec
        assert spec is not None
        uid, name = job.metadata.uid or "", job.metadata.name or ""
        template = spec.template or PodTemplateSpec()
        meta = template.metadata or type(job.metadata)()
        labels = dict(meta.labels or {})
        for key, value in ((LEGACY_CONTROLLER_UID_LABEL, uid), (LEGACY_JOB_NAME_LABEL, name),
                           (CONTROLLER_UID_LABEL, uid), (JOB_NAME_LABEL, name)):
            labels.setdefault(key, value)
        meta.labels = labels
        template.metadata = meta
        spec.template = template
        if spec.selector is None:
            spec.selector = LabelSelector(match_labels={CONTROLLER_UID_LABEL: uid})

    def validate_create(self, obj: TypedObject) -> list[FieldError]:
        assert isinstance(obj, Job)
        return self.validate_meta(obj) + self._validate_generated_selector(obj) + self._validate(obj)

    def _validate(self, job: Job) -> list[FieldError]:
        spec = job.spec or JobSpec()
        errs = validate_job_spec(spec, "spec", self.pods)
        if spec.selector is None:
            errs.append(required("spec.selector"))
        else:
            try:
                selector = selector_from_label_selector(spec.selector)
            except SelectorError as exc:
                errs.append(invalid("spec.selector", str(exc), "invalid label selector"))
            else:
                labels = (spec.template.metadata.labels if spec.template and spec.template.metadata else None) or {}
                if not selector.matches(labels):
                    errs.append(invalid("spec.template.metadata.labels", go_labels(labels),
                                        "`selector` does not match template `labels`"))
        if spec.completion_mode == "Indexed" and spec.completions:
            hostname = f"{job.metadata.name}-{spec.completions - 1}"
            if validation.dns1123_label_errors(hostname):
                errs.append(invalid("metadata.name", job.metadata.name or "",
                                    f"will not able to create pod with invalid DNS label: {hostname}"))
        return errs

    @staticmethod
    def _validate_generated_selector(job: Job) -> list[FieldError]:
        """validateGeneratedSelector: with a generated selector, the template must carry the job's labels."""
        spec = job.spec or JobSpec()
        if spec.manual_selector or spec.selector is None:
            return []
        labels = (spec.template.metadata.labels if spec.template and spec.template.metadata else None) or {}
        uid, name = job.metadata.uid or "", job.metadata.name or ""
        errs: list[FieldError] = []
        expected = {LEGACY_CONTROLLER_UID_LABEL: uid, LEGACY_JOB_NAME_LABEL: name,
                    CONTROLLER_UID_LABEL: uid, JOB_NAME_LABEL: name}
        for key, value in expected.items():
            # ValidateHasLabel
            if key not in labels:
                errs.append(required(f"spec.template.metadata.labels[{key}]", f"must be '{value}'"))
            elif labels[key] != value:
                errs.append(invalid(f"spec.template.metadata.labels[{key}]", go_labels(labels), f"must be '{value}'"))
        try:
            matches = selector_from_label_selector(spec.selector).matches(expected)
        except SelectorError:
            return errs
        if not matches:
            errs.append(invalid("spec.selector", selector_literal(spec.selector), "`selector` not auto-generated"))
        return errs

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        assert isinstance(new, Job) and isinstance(old, Job)
        errs = self.validate_meta_update(new, old)
        if subresource == "status":
            return errs + self._validate_status(new, old)
        spec, old_spec = new.spec or JobSpec(), old.spec or JobSpec()
        errs += self._validate(new)
        if spec.completions != old_spec.completions:
            # ElasticIndexedJob: an Indexed Job may change completions together with parallelism.
            if spec.completion_mode != "Indexed":
                errs.append(invalid("spec.completions", spec.completions, "field is immutable"))
            elif spec.completions is not None and spec.completions != spec.parallelism:
                errs.append(invalid("spec.completions", spec.completions,
                                    "can only be modified in tandem with spec.parallelism"))
        if dump(spec.selector) != dump(old_spec.selector):
            errs.append(invalid("spec.selector", selector_literal(spec.selector), "field is immutable"))
        if not self._template_update_allowed(spec, old_spec, old):
            errs.append(invalid("spec.template", template_literal(spec.template), "field is immutable"))
        for name, now, before in (("completionMode", spec.completion_mode, old_spec.completion_mode),
                                  ("podFailurePolicy", dump(spec.pod_failure_policy), dump(old_spec.pod_failure_policy)),
                                  ("backoffLimitPerIndex", spec.backoff_limit_per_index, old_spec.backoff_limit_per_index),
                                  ("managedBy", spec.managed_by, old_spec.managed_by),
                                  ("successPolicy", dump(spec.success_policy), dump(old_spec.success_policy))):
            if now != before:
                shown = now if isinstance(now, str | int) or now is None else validation.GoLiteral("{...}")
                errs.append(invalid(f"spec.{name}", shown, "field is immutable"))
        return errs

    @staticmethod
    def _template_update_allowed(spec: JobSpec, old_spec: JobSpec, old: Job) -> bool:
        """validatePodTemplateUpdate: the template is immutable, except that a suspended Job that never
        started may change its scheduling directives (node selector, tolerations, affinity, scheduling
        gates) and its template's labels and annotations (AllowMutableSchedulingDirectives)."""
        new_t, old_t = dump(spec.template) or {}, dump(old_spec.template) or {}
        if new_t == old_t:
            return True
        never_started = bool(old_spec.suspend) and not (old.status and old.status.start_time)
        if not never_started:
            return False
        for t in (new_t, old_t):
            (t.get("metadata") or {}).pop("labels", None)
            (t.get("metadata") or {}).pop("annotations", None)
            for key in ("nodeSelector", "tolerations", "affinity", "schedulingGates"):
                (t.get("spec") or {}).pop(key, None)
        return json.dumps(new_t, sort_keys=True) == json.dumps(old_t, sort_keys=True)

    @staticmethod
    def _validate_status(new: Job, old: Job) -> list[FieldError]:
        """validateJobStatus / ValidateJobStatusUpdate: the checks a status writer (the controller) can trip."""
        status = new.status
        if status is None:
            return []
        errs: list[FieldError] = []
        for name in ("active", "succeeded", "failed", "ready", "terminating"):
            errs += nonnegative_field(f"status.{name}", getattr(status, name))
        conditions = {c.type: c.status for c in status.conditions or []}
        old_conditions = {c.type: c.status for c in ((old.status.conditions if old.status else None) or [])}
        for ctype in ("Failed", "Complete", "FailureTarget"):
            if old_conditions.get(ctype) == "True" and conditions.get(ctype) != "True":
                errs.append(validation.FieldError("Invalid", "status.conditions", validation.GoLiteral("<omitted>"),
                                                  f"cannot disable the terminal {ctype}=True condition"))
        if conditions.get("Complete") == "True" and conditions.get("Failed") == "True":
            errs.append(validation.FieldError("Invalid", "status.conditions", validation.GoLiteral("<omitted>"),
                                              "cannot set Complete=True and Failed=true conditions"))
        old_status = old.status
        if old_status is not None:
            if (status.failed or 0) < (old_status.failed or 0):
                errs.append(invalid("status.failed", status.failed or 0, "cannot decrease the failed counter"))
            if (status.succeeded or 0) < (old_status.succeeded or 0):
                errs.append(invalid("status.succeeded", status.succeeded or 0, "cannot decrease the succeeded counter"))
        return errs

    def field_labels(self, obj: dict[str, Any]) -> dict[str, str]:
        fields = super().field_labels(obj)
        fields["status.successful"] = str((obj.get("status") or {}).get("succeeded", 0))
        return fields

    def supported_fields(self) -> set[str]:
        return super().supported_fields() | {"status.successful"}
