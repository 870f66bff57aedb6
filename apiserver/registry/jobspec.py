"""A Job's spec, as a Job holds it and as a CronJob's jobTemplate does: SetDefaults_Job's spec defaults and
ValidateJobSpec with kube's messages (parallelism, completions, backoffLimit and backoffLimitPerIndex,
completionMode, podFailurePolicy, successPolicy, podReplacementPolicy, the template's restartPolicy), and
the Go-literal renderings kube's messages quote. `batch.py` and `cronjobs.py` build their strategies on it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kubelab import validation
from kubelab.models import JobSpec, Pod
from kubelab.models.apps import PodTemplateSpec
from kubelab.validation import FieldError, invalid, not_supported, required

from .pods import PodStrategy

CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"
LEGACY_JOB_NAME_LABEL = "job-name"
MAX_PARALLELISM_INDEXED = 100_000
MAX_BACKOFF_LIMIT = 2**31 - 1
_FAILURE_ACTIONS = ["Count", "FailIndex", "FailJob", "Ignore"]
_CONDITION_STATUSES = ["False", "True", "Unknown"]


def nonnegative_field(field: str, value: int | None) -> list[FieldError]:
    """ValidateNonnegativeField."""
    if value is not None and value < 0:
        return [invalid(field, value, "must be greater than or equal to 0")]
    return []


def go_labels(labels: dict[str, str]) -> validation.GoLiteral:
    return validation.GoLiteral("map[string]string{" + ", ".join(f"{validation.go_quote(k)}:{validation.go_quote(v)}"
                                                                 for k, v in sorted(labels.items())) + "}")


def selector_literal(selector: Any) -> validation.GoLiteral:
    labels = (selector.match_labels if selector else None) or {}
    return validation.GoLiteral("&v1.LabelSelector{MatchLabels:" + str(go_labels(labels)) +
                                ", MatchExpressions:[]v1.LabelSelectorRequirement(nil)}")


def int_list(values: list[int]) -> validation.GoLiteral:
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
        pods.set_template_defaults(pod)
        template.spec = pod.spec


def validate_job_spec(spec: JobSpec, path: str, pods: PodStrategy) -> list[FieldError]:
    """validateJobSpec: counts, completion mode, pod failure policy, the template and its restartPolicy."""
    errs: list[FieldError] = []
    for name, value in (("parallelism", spec.parallelism), ("completions", spec.completions),
                        ("activeDeadlineSeconds", spec.active_deadline_seconds),
                        ("backoffLimit", spec.backoff_limit), ("ttlSecondsAfterFinished", spec.ttl_seconds_after_finished),
                        ("backoffLimitPerIndex", spec.backoff_limit_per_index),
                        ("maxFailedIndexes", spec.max_failed_indexes)):
        errs += nonnegative_field(f"{path}.{name}", value)
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
            errs += nonnegative_field(f"{rpath}.succeededCount", rule.succeeded_count)
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
                errs.append(invalid(f"{cpath}.values", int_list(values), "at least one value is required"))
            seen: set[int] = set()
            for j, value in enumerate(values):
                if codes.operator == "In" and value == 0:
                    errs.append(invalid(f"{cpath}.values[{j}]", value, "must not be 0 for the In operator"))
                if value in seen:
                    errs.append(validation.duplicate(f"{cpath}.values[{j}]", value))
                seen.add(value)
            if values != sorted(values):
                errs.append(invalid(f"{cpath}.values", int_list(values), "must be ordered"))
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


def template_literal(template: PodTemplateSpec | None) -> validation.GoLiteral:
    """The bad value of an immutable-template error. kube prints the whole core.PodTemplateSpec with %#v,
    thousands of characters of Go syntax; kubelab prints the type and leaves the fields out."""
    return validation.GoLiteral("core.PodTemplateSpec{...}")


def dump(model: Any) -> Any:
    return model.to_dict() if model is not None else None
