"""What the pod-template kinds added after Deployments and ReplicaSets share (DaemonSets, StatefulSets,
ReplicationControllers): the template's Pod defaults and validation, and kube's IntOrString checks.

A template is validated as ValidatePodTemplateSpecFor{ReplicaSet,StatefulSet,RC} and the DaemonSet spec
do: its labels must be selected, its pod spec must pass the Pod's own validation (reported under
`spec.template.spec`), its restartPolicy must be Always and activeDeadlineSeconds is forbidden.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from kubelab import validation
from kubelab.kinds import ResourceType
from kubelab.models import LabelSelector, Pod, PodTemplateSpec, TypedObject
from kubelab.selectors import Selector, SelectorError, selector_from_label_selector
from kubelab.validation import FieldError, forbidden, invalid, not_supported, required

from .pods import PodStrategy
from .strategy import Strategy

PERCENT = re.compile(r"[0-9]+%")
PERCENT_MESSAGE = "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%')"


def go_labels(labels: dict[str, str] | None) -> validation.GoLiteral:
    """A label map as Go's %#v prints it in a field error: map[string]string{"app":"web"}."""
    return validation.GoLiteral("map[string]string{" + ", ".join(
        f"{validation.go_quote(k)}:{validation.go_quote(v)}" for k, v in sorted((labels or {}).items())) + "}")


def go_selector(selector: LabelSelector | None) -> validation.GoLiteral:
    """A LabelSelector as Go prints it in "field is immutable" and "empty selector" errors."""
    data = selector.to_dict() if selector else {}
    labels = data.get("matchLabels")
    exprs = data.get("matchExpressions")
    labels_text = "map[string]string(nil)" if not labels else str(go_labels(labels))
    exprs_text = "[]v1.LabelSelectorRequirement(nil)" if not exprs else \
        "[]v1.LabelSelectorRequirement{" + ", ".join(
            f"v1.LabelSelectorRequirement{{Key:{validation.go_quote(e.get('key', ''))}, "
            f"Operator:{validation.go_quote(e.get('operator', ''))}, Values:{_go_strings(e.get('values'))}}}"
            for e in exprs) + "}"
    return validation.GoLiteral(f"&v1.LabelSelector{{MatchLabels:{labels_text}, MatchExpressions:{exprs_text}}}")


def _go_strings(values: list[str] | None) -> str:
    if values is None:
        return "[]string(nil)"
    return "[]string{" + ", ".join(validation.go_quote(v) for v in values) + "}"


def go_int_or_string(value: int | str | None) -> validation.GoLiteral:
    """intstr.IntOrString as %#v prints it (its String() has a pointer receiver, so field.Error never calls it)."""
    if isinstance(value, str):
        return validation.GoLiteral(f"intstr.IntOrString{{Type:1, IntVal:0, StrVal:{validation.go_quote(value)}}}")
    return validation.GoLiteral(f"intstr.IntOrString{{Type:0, IntVal:{value or 0}, StrVal:\"\"}}")


def int_or_percent_errors(value: int | str | None, path: str) -> list[FieldError]:
    """ValidatePositiveIntOrPercent and IsNotMoreThan100Percent."""
    if value is None:
        return []
    if isinstance(value, str):
        if not PERCENT.fullmatch(value):
            return [invalid(path, go_int_or_string(value), PERCENT_MESSAGE)]
        if int(value[:-1]) > 100:
            return [invalid(path, go_int_or_string(value), "must not be greater than 100%")]
        return []
    return nonnegative(value, path)


def int_or_percent_value(value: int | str | None) -> int:
    """getIntOrPercentValue: the number of an int or of a valid percent; anything else is 0."""
    if isinstance(value, str):
        return int(value[:-1]) if PERCENT.fullmatch(value) else 0
    return value or 0


def nonnegative(value: int | None, path: str) -> list[FieldError]:
    if value is not None and value < 0:
        return [invalid(path, value, "must be greater than or equal to 0")]
    return []


def template_pod(template: PodTemplateSpec | None) -> Pod | None:
    if template is None:
        return None
    return Pod(metadata=template.metadata or {}, spec=template.spec)  # type: ignore[arg-type]


def default_template(pods: PodStrategy, template: PodTemplateSpec | None) -> None:
    """The template's pod spec gets the Pod's defaults (restartPolicy Always, dnsPolicy, ...)."""
    pod = template_pod(template)
    if pod is not None and template is not None:
        pods.set_template_defaults(pod)
        template.spec = pod.spec


def parse_selector(selector: LabelSelector | None, *, kind: str) -> tuple[Selector | None, list[FieldError]]:
    """The selector of a DaemonSet or StatefulSet: required, non-empty, parseable."""
    if selector is None:
        return None, [required("spec.selector")]
    errs: list[FieldError] = []
    if not (selector.match_labels or selector.match_expressions):
        errs.append(invalid("spec.selector", go_selector(selector), f"empty selector is invalid for {kind}"))
    try:
        return selector_from_label_selector(selector), errs
    except SelectorError as exc:
        return None, [*errs, invalid("spec.selector", str(exc), "invalid label selector")]


def validate_template(pods: PodStrategy, template: PodTemplateSpec | None, selector: Selector | None, *,
                      kind: str) -> list[FieldError]:
    """The template checks every controller kind shares; `kind` names it in the activeDeadlineSeconds error."""
    if template is None:
        return [required("spec.template")]
    errs: list[FieldError] = []
    labels = (template.metadata.labels if template.metadata else None) or {}
    if selector is not None and not selector.matches(labels):
        errs.append(invalid("spec.template.metadata.labels", go_labels(labels),
                            "`selector` does not match template `labels`"))
    errs += validation.validate_labels(labels, "spec.template.metadata.labels")
    pod = template_pod(template)
    if pod is not None:
        errs += [replace(err, field="spec.template." + err.field) for err in pods.validate_spec(pod)]
    spec = template.spec
    restart = spec.restart_policy if spec else None
    if restart is not None and restart != "Always" and restart in ("OnFailure", "Never"):
        errs.append(not_supported("spec.template.spec.restartPolicy", restart, ["Always"]))
    extra: dict[str, Any] = (spec.model_extra if spec is not None and spec.model_extra is not None else {})
    if extra.get("activeDeadlineSeconds") is not None:
        errs.append(forbidden("spec.template.spec.activeDeadlineSeconds",
                              f"activeDeadlineSeconds in {kind} is not Supported"))
    return errs


class TemplateStrategy(Strategy):
    """Defaults, generation and validation plumbing of a kind with a pod template; subclasses say what
    their spec defaults to and how it is checked (`validate_spec`)."""
    counts_spec_generation = True  # what observedGeneration and `kubectl rollout status` compare against

    kind_word = ""  # how kube's messages name the kind: "daemonset", "statefulset"

    def __init__(self, rt: ResourceType, pods: PodStrategy) -> None:
        super().__init__(rt)
        self.pods = pods

    def prepare_create(self, obj: TypedObject) -> None:
        super().prepare_create(obj)
        status = getattr(obj, "status", None)
        obj.status = status.__class__() if status is not None else None  # type: ignore[attr-defined]

    def validate_create(self, obj: TypedObject) -> list[FieldError]:
        return self.validate_meta(obj) + self.validate_spec(obj)

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        # ValidateObjectMetaUpdate: the name's format is not checked again on update.
        errs = self.validate_meta_update(new, old)
        if subresource == "status":
            return errs
        return errs + self.validate_spec(new) + self.validate_spec_update(new, old)

    def validate_spec(self, obj: TypedObject) -> list[FieldError]:
        return []

    def validate_spec_update(self, new: TypedObject, old: TypedObject) -> list[FieldError]:
        return []


def immutable_selector(new: LabelSelector | None, old: LabelSelector | None) -> list[FieldError]:
    """apps/v1 made selectors immutable (changing them would orphan the running pods)."""
    if (new.to_dict() if new else None) != (old.to_dict() if old else None):
        return [invalid("spec.selector", go_selector(new), "field is immutable")]
    return []
