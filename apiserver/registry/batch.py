"""batch/v1 Jobs and CronJobs: defaults, the generated selector, validation with kube's messages.

A Job gets SetDefaults_Job's defaults (parallelism and completions 1, backoffLimit 6, completionMode
NonIndexed, suspend false, podReplacementPolicy) and, on create, jobStrategy's generated selector: unless
`manualSelector` is true, the pod template is labelled with the job's UID and name under both the
`batch.kubernetes.io/` keys and the legacy bare ones, and the selector matches
`batch.kubernetes.io/controller-uid` (kube 1.27+). The template's restartPolicy must be OnFailure or Never,
and the template, selector, completionMode and podFailurePolicy are immutable (ValidateJobSpecUpdate).
A CronJob's schedule is checked with kubelab.cron (robfig's ParseStandard and its messages), its timeZone
against the zone database (time.LoadLocation), and its job template as a Job's spec without a selector.
"""

from __future__ import annotations

import json
import re
import zoneinfo
from dataclasses import replace
from typing import Any

from kubelab import cron, validation
from kubelab.models import CronJob, Job, JobSpec, LabelSelector, Pod, TypedObject
from kubelab.models.apps import PodTemplateSpec
from kubelab.selectors import SelectorError, selector_from_label_selector
from kubelab.validation import FieldError, invalid, not_supported, required

from .. import requestctx
from .pods import PodStrategy
from .strategy import Strategy

CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"
LEGACY_JOB_NAME_LABEL = "job-name"
MAX_PARALLELISM_INDEXED = 100_000
MAX_BACKOFF_LIMIT = 2**31 - 1
_FAILURE_ACTIONS = ["Count", "FailIndex", "FailJob", "Ignore"]
_CONDITION_STATUSES = ["False", "True", "Unknown"]
_TZ_PART = re.compile(r"[A-Za-z.\-_0-9+]{1,14}", re.ASCII)


def _nonnegative(field: str, value: int | None) -> list[FieldError]:
    """ValidateNonnegativeField."""
    if value is not None and value < 0:
        return [invalid(field, value, "must be greater than or equal to 0")]
    return []


def _go_labels(labels: dict[str, str]) -> validation.GoLiteral:
    return validation.GoLiteral("map[string]string{" + ", ".join(f"{validation.go_quote(k)}:{validation.go_quote(v)}"
                                                                 for k, v in sorted(labels.items())) + "}")


def _selector_literal(selector: Any) -> validation.GoLiteral:
    labels = (selector.match_labels if selector else None) or {}
    return validation.GoLiteral("&v1.LabelSelector{MatchLabels:" + str(_go_labels(labels)) +
                                ", MatchExpressions:[]v1.LabelSelectorRequirement(nil)}")


def _int_list(values: list[int]) -> validation.GoLiteral:
    return validation.GoLiteral("[]int32{" + ", ".join(str(v) for v in values) + "}")


def default_job_spec(spec: JobSpec, pods: PodStrategy) -> None:
    """SetDefaults_Job's spec part (shared with a CronJob's job template)."""
    if spec.completions is None and spec.parallelism is None:
        spec.completions = 1
        spec.parallelism = 1
    if spec.parallelism is None:
        spec.parallelism = 1
    if spec.backoff_limit is None:
        spec.backoff_limit = MAX_BACKOFF_LIMIT if spec.backoff_limit_per_index is not None else 6
    if spec.completion_mode is None:
        spec.completion_mode = "NonIndexed"
    if spec.suspend is None:
        spec.suspend = False
    if spec.pod_failure_policy is not None:
        for rule in spec.pod_failure_policy.rules or []:
            for pattern in rule.on_pod_conditions or []:
                pattern.status = pattern.status or "True"
    if spec.pod_replacement_policy is None:
        spec.pod_replacement_policy = "Failed" if spec.pod_failure_policy is not None else "TerminatingOrFailed"
    template = spec.template
    if template is not None and template.spec is not None:
        pod = Pod(metadata=template.metadata or {}, spec=template.spec)  # type: ignore[arg-type]
        pods.set_defaults(pod)
        template.spec = pod.spec


def validate_job_spec(spec: JobSpec, path: str, pods: PodStrategy) -> list[FieldError]:
    """validateJobSpec: counts, completion mode, pod failure policy, the template and its restartPolicy."""
    errs: list[FieldError] = []
    for name, value in (("parallelism", spec.parallelism), ("completions", spec.completions),
                        ("activeDeadlineSeconds", spec.active_deadline_seconds),
                        ("backoffLimit", spec.backoff_limit), ("ttlSecondsAfterFinished", spec.ttl_seconds_after_finished),
                        ("backoffLimitPerIndex", spec.backoff_limit_per_index),
                        ("maxFailedIndexes", spec.max_failed_indexes)):
        errs += _nonnegative(f"{path}.{name}", value)
    if spec.max_failed_indexes is not None and spec.backoff_limit_per_index is None:
        errs.append(required(f"{path}.backoffLimitPerIndex", "when maxFailedIndexes is specified"))
    mode = spec.completion_mode
    if mode is not None and mode not in ("NonIndexed", "Indexed"):
        errs.append(not_supported(f"{path}.completionMode", mode, ["NonIndexed", "Indexed"]))
    if mode == "Indexed":
        if spec.completions is None:
            errs.append(required(f"{path}.completions", "when completion mode is Indexed"))
        if spec.parallelism is not None and spec.parallelism > MAX_PARALLELISM_INDEXED:
            errs.append(invalid(f"{path}.parallelism", spec.parallelism,
                                f"must be less than or equal to {MAX_PARALLELISM_INDEXED} when completion mode is Indexed"))
        if spec.completions is not None and spec.max_failed_indexes is not None \
                and spec.max_failed_indexes > spec.completions:
            errs.append(invalid(f"{path}.maxFailedIndexes", spec.max_failed_indexes,
                                "must be less than or equal to completions"))
        if spec.max_failed_indexes is not None and spec.max_failed_indexes > MAX_PARALLELISM_INDEXED:
            errs.append(invalid(f"{path}.maxFailedIndexes", spec.max_failed_indexes,
                                f"must be less than or equal to {MAX_PARALLELISM_INDEXED}"))
    if mode in (None, "NonIndexed"):
        if spec.backoff_limit_per_index is not None:
            errs.append(invalid(f"{path}.backoffLimitPerIndex", spec.backoff_limit_per_index,
                                "requires indexed completion mode"))
        if spec.max_failed_indexes is not None:
            errs.append(invalid(f"{path}.maxFailedIndexes", spec.max_failed_indexes, "requires indexed completion mode"))
    containers = {c.name for c in ((spec.template.spec.containers or []) + (spec.template.spec.init_containers or [])
                                   if spec.template and spec.template.spec else [])}
    if spec.pod_failure_policy is not None:
        errs += _validate_pod_failure_policy(spec, f"{path}.podFailurePolicy", containers)
    if spec.pod_replacement_policy is not None:
        allowed = ["Failed"] if spec.pod_failure_policy is not None else ["Failed", "TerminatingOrFailed"]
        if spec.pod_replacement_policy not in allowed:
            errs.append(not_supported(f"{path}.podReplacementPolicy", spec.pod_replacement_policy, allowed))
    if spec.success_policy is not None:
        if mode != "Indexed":
            errs.append(invalid(f"{path}.successPolicy", validation.GoLiteral("batch.SuccessPolicy{...}"),
                                "requires indexed completion mode"))
        else:
            errs += _validate_success_policy(spec, f"{path}.successPolicy")
    template = spec.template
    if template is None or template.spec is None:
        errs.append(required(f"{path}.template.spec.containers"))
        restart = ""
    else:
        labels = (template.metadata.labels if template.metadata else None) or {}
        errs += validation.validate_labels(labels, f"{path}.template.metadata.labels")
        pod = Pod(metadata=template.metadata or {}, spec=template.spec)  # type: ignore[arg-type]
        for err in pods.validate_spec(pod):
            # The Job's own restartPolicy check below replaces the pod's (Always is valid for a pod).
            if err.field != "spec.restartPolicy":
                errs.append(replace(err, field=f"{path}.template." + err.field))
        restart = template.spec.restart_policy or ""
    if restart in ("Always", ""):
        errs.append(required(f"{path}.template.spec.restartPolicy", 'valid values: "OnFailure", "Never"'))
    elif restart not in ("OnFailure", "Never"):
        errs.append(not_supported(f"{path}.template.spec.restartPolicy", restart, ["OnFailure", "Never"]))
    elif spec.pod_failure_policy is not None and restart != "Never":
        errs.append(invalid(f"{path}.template.spec.restartPolicy", restart,
                            'only "Never" is supported when podFailurePolicy is specified'))
    return errs


def parse_index_set(text: str, completions: int) -> tuple[set[int] | None, str]:
    """validateIndexesFormat: comma-separated ascending, non-overlapping `N` or `N-M` below completions.
    (the indexes, "") or (None, what is wrong)."""
    result: set[int] = set()
    last = -1
    for part in text.split(","):
        low_text, dash, high_text = part.partition("-")
        if not validation.is_ascii_digits(low_text) or (dash and not validation.is_ascii_digits(high_text)):
            return None, f"cannot convert string to integer for index: {part!r}"
        low, high = int(low_text), int(high_text) if dash else int(low_text)
        if high < low:
            return None, f"non-increasing order, previous: {low}, current: {high}"
        if low <= last:
            return None, f"overlapping indexes found, previous: {last}, current: {low}"
        if high >= completions:
            return None, f"too large index: {high}"
        result.update(range(low, min(high, completions - 1) + 1))
        last = high
    return result, ""


def _validate_success_policy(spec: JobSpec, path: str) -> list[FieldError]:
    rules = (spec.success_policy.rules if spec.success_policy else None) or []
    errs: list[FieldError] = []
    if not rules:
        errs.append(required(f"{path}.rules", "at least one rules must be specified when the successPolicy is specified"))
    if len(rules) > 20:
        errs.append(validation.FieldError("TooMany", f"{path}.rules", len(rules), "must have at most 20 items"))
    completions = spec.completions or 0
    for i, rule in enumerate(rules):
        rpath = f"{path}.rules[{i}]"
        if rule.succeeded_count is None and rule.succeeded_indexes is None:
            errs.append(required(rpath, "at least one of succeededCount or succeededIndexes must be specified"))
        total = 0
        if rule.succeeded_indexes is not None:
            indexes, problem = parse_index_set(rule.succeeded_indexes, completions)
            if indexes is None:
                errs.append(invalid(f"{rpath}.succeededIndexes", rule.succeeded_indexes,
                                    f"error parsing succeededIndexes: {problem}"))
            else:
                total = len(indexes)
        if rule.succeeded_count is not None:
            errs += _nonnegative(f"{rpath}.succeededCount", rule.succeeded_count)
            if rule.succeeded_count > completions:
                errs.append(invalid(f"{rpath}.succeededCount", rule.succeeded_count,
                                    f"must be less than or equal to {completions} (the number of specified completions)"))
            if rule.succeeded_indexes is not None and rule.succeeded_count > total:
                errs.append(invalid(f"{rpath}.succeededCount", rule.succeeded_count,
                                    f"must be less than or equal to {total} (the number of indexes in the specified "
                                    "succeededIndexes field)"))
    return errs


def _validate_pod_failure_policy(spec: JobSpec, path: str, containers: set[str | None]) -> list[FieldError]:
    errs: list[FieldError] = []
    rules = spec.pod_failure_policy.rules or [] if spec.pod_failure_policy else []
    if len(rules) > 20:
        errs.append(validation.FieldError("TooMany", f"{path}.rules", len(rules), "must have at most 20 items"))
    for i, rule in enumerate(rules):
        rpath = f"{path}.rules[{i}]"
        if not rule.action:
            errs.append(required(f"{rpath}.action", 'valid values: ["Count" "FailIndex" "FailJob" "Ignore"]'))
        elif rule.action == "FailIndex":
            if spec.backoff_limit_per_index is None:
                errs.append(invalid(f"{rpath}.action", rule.action, "requires the backoffLimitPerIndex to be set"))
        elif rule.action not in _FAILURE_ACTIONS:
            errs.append(not_supported(f"{rpath}.action", rule.action, _FAILURE_ACTIONS))
        codes = rule.on_exit_codes
        if codes is not None:
            cpath = f"{rpath}.onExitCodes"
            if not codes.operator:
                errs.append(required(f"{cpath}.operator", 'valid values: ["In" "NotIn"]'))
            elif codes.operator not in ("In", "NotIn"):
                errs.append(not_supported(f"{cpath}.operator", codes.operator, ["In", "NotIn"]))
            if codes.container_name is not None and codes.container_name not in containers:
                errs.append(invalid(f"{cpath}.containerName", codes.container_name,
                                    "must be one of the container or initContainer names in the pod template"))
            values = codes.values or []
            if not values:
                errs.append(invalid(f"{cpath}.values", _int_list(values), "at least one value is required"))
            seen: set[int] = set()
            for j, value in enumerate(values):
                if codes.operator == "In" and value == 0:
                    errs.append(invalid(f"{cpath}.values[{j}]", value, "must not be 0 for the In operator"))
                if value in seen:
                    errs.append(validation.duplicate(f"{cpath}.values[{j}]", value))
                seen.add(value)
            if values != sorted(values):
                errs.append(invalid(f"{cpath}.values", _int_list(values), "must be ordered"))
        for j, pattern in enumerate(rule.on_pod_conditions or []):
            ppath = f"{rpath}.onPodConditions[{j}]"
            errs += [invalid(f"{ppath}.type", pattern.type or "", p)
                     for p in validation.qualified_name_errors(pattern.type or "")]
            if not pattern.status:
                errs.append(required(f"{ppath}.status", 'valid values: ["False" "True" "Unknown"]'))
            elif pattern.status not in _CONDITION_STATUSES:
                errs.append(not_supported(f"{ppath}.status", pattern.status, _CONDITION_STATUSES))
        if codes is not None and rule.on_pod_conditions:
            errs.append(validation.FieldError("Invalid", rpath, validation.GoLiteral("<omitted>"),
                                              "specifying both OnExitCodes and OnPodConditions is not supported"))
        if codes is None and not rule.on_pod_conditions:
            errs.append(validation.FieldError("Invalid", rpath, validation.GoLiteral("<omitted>"),
                                              "specifying one of OnExitCodes and OnPodConditions is required"))
    return errs


def _template_literal(template: PodTemplateSpec | None) -> validation.GoLiteral:
    """The bad value of an immutable-template error. kube prints the whole core.PodTemplateSpec with %#v,
    thousands of characters of Go syntax; kubelab prints the type and leaves the fields out."""
    return validation.GoLiteral("core.PodTemplateSpec{...}")


def _dump(model: Any) -> Any:
    return model.to_dict() if model is not None else None


class JobStrategy(Strategy):
    """jobStrategy: the generated selector on create, kube's validation, generation on spec changes."""

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
        obj.metadata.generation = 1
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

    def prepare_update(self, new: TypedObject, old: TypedObject, subresource: str | None) -> None:
        super().prepare_update(new, old, subresource)
        old_spec = getattr(old, "spec", None)
        new_spec = getattr(new, "spec", None)
        generation = old.metadata.generation or 1
        if subresource is None and _dump(old_spec) != _dump(new_spec):
            generation += 1
        new.metadata.generation = generation

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
                    errs.append(invalid("spec.template.metadata.labels", _go_labels(labels),
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
                errs.append(invalid(f"spec.template.metadata.labels[{key}]", _go_labels(labels), f"must be '{value}'"))
        try:
            matches = selector_from_label_selector(spec.selector).matches(expected)
        except SelectorError:
            return errs
        if not matches:
            errs.append(invalid("spec.selector", _selector_literal(spec.selector), "`selector` not auto-generated"))
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
        if _dump(spec.selector) != _dump(old_spec.selector):
            errs.append(invalid("spec.selector", _selector_literal(spec.selector), "field is immutable"))
        if not self._template_update_allowed(spec, old_spec, old):
            errs.append(invalid("spec.template", _template_literal(spec.template), "field is immutable"))
        for name, now, before in (("completionMode", spec.completion_mode, old_spec.completion_mode),
                                  ("podFailurePolicy", _dump(spec.pod_failure_policy), _dump(old_spec.pod_failure_policy)),
                                  ("backoffLimitPerIndex", spec.backoff_limit_per_index, old_spec.backoff_limit_per_index),
                                  ("managedBy", spec.managed_by, old_spec.managed_by),
                                  ("successPolicy", _dump(spec.success_policy), _dump(old_spec.success_policy))):
            if now != before:
                shown = now if isinstance(now, str | int) or now is None else validation.GoLiteral("{...}")
                errs.append(invalid(f"spec.{name}", shown, "field is immutable"))
        return errs

    @staticmethod
    def _template_update_allowed(spec: JobSpec, old_spec: JobSpec, old: Job) -> bool:
        """validatePodTemplateUpdate: the template is immutable, except that a suspended Job that never
        started may change its scheduling directives (node selector, tolerations, affinity, scheduling
        gates) and its template's labels and annotations (AllowMutableSchedulingDirectives)."""
        new_t, old_t = _dump(spec.template) or {}, _dump(old_spec.template) or {}
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
            errs += _nonnegative(f"status.{name}", getattr(status, name))
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
        obj.metadata.generation = 1
        obj.status = None  # type: ignore[attr-defined]

    def prepare_update(self, new: TypedObject, old: TypedObject, subresource: str | None) -> None:
        super().prepare_update(new, old, subresource)
        generation = old.metadata.generation or 1
        if subresource is None and _dump(getattr(old, "spec", None)) != _dump(getattr(new, "spec", None)):
            generation += 1
        new.metadata.generation = generation

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
        errs += _nonnegative("spec.startingDeadlineSeconds", spec.starting_deadline_seconds)
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
            errs.append(invalid("spec.jobTemplate.spec.selector", _selector_literal(job_spec.selector),
                                "`selector` will be auto-generated"))
        if job_spec.manual_selector:
            errs.append(not_supported("spec.jobTemplate.spec.manualSelector", validation.GoLiteral("true"),
                                      ["nil", "false"]))
        errs += _nonnegative("spec.successfulJobsHistoryLimit", spec.successful_jobs_history_limit)
        errs += _nonnegative("spec.failedJobsHistoryLimit", spec.failed_jobs_history_limit)
        return errs
