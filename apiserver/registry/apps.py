"""apps/v1 Deployments and ReplicaSets, and v1 ConfigMaps: defaults, validation, generation, scale.

Workloads carry a pod template, which gets the Pod's own defaults and validation (under
`spec.template.spec`). `metadata.generation` counts spec changes, which is what `observedGeneration`
and `kubectl rollout status` compare against. The scale subresource reads and writes spec.replicas
through an autoscaling/v1 Scale.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kubelab import validation
from kubelab.models import ConfigMap, Deployment, Pod, ReplicaSet, RollingUpdateDeployment, TypedObject
from kubelab.models import DeploymentStrategy as RolloutStrategy
from kubelab.selectors import SelectorError, selector_from_label_selector
from kubelab.validation import FieldError, invalid, required

from . import decoding
from .pods import PodStrategy
from .strategy import Strategy

Workload = Deployment | ReplicaSet


def _template_pod(obj: Workload) -> Pod | None:
    template = obj.spec.template if obj.spec else None
    if template is None:
        return None
    return Pod(metadata=template.metadata or {}, spec=template.spec)  # type: ignore[arg-type]


def _selector_text(obj: Workload) -> str:
    selector = obj.spec.selector if obj.spec else None
    labels = (selector.match_labels if selector else None) or {}
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


class WorkloadStrategy(Strategy):
    """What Deployments and ReplicaSets share."""
    counts_spec_generation = True

    def __init__(self, rt, pods: PodStrategy) -> None:  # type: ignore[no-untyped-def]
        super().__init__(rt)
        self.pods = pods

    def set_defaults(self, obj: TypedObject) -> None:
        assert isinstance(obj, Deployment | ReplicaSet)
        spec = obj.spec
        if spec is None:
            return
        if spec.replicas is None:
            spec.replicas = 1
        pod = _template_pod(obj)
        if pod is not None and spec.template is not None:
            self.pods.set_template_defaults(pod)
            spec.template.spec = pod.spec

    def prepare_create(self, obj: TypedObject) -> None:
        super().prepare_create(obj)
        obj.status = obj.status.__class__() if getattr(obj, "status", None) is not None else None  # type: ignore[attr-defined]

    def validate_create(self, obj: TypedObject) -> list[FieldError]:
        return self.validate_meta(obj) + self.validate_workload(obj)  # type: ignore[arg-type]

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        assert isinstance(new, Deployment | ReplicaSet) and isinstance(old, Deployment | ReplicaSet)
        errs = super().validate_update(new, old, subresource) + self.validate_workload(new)
        old_sel = old.spec.selector.to_dict() if old.spec and old.spec.selector else None
        new_sel = new.spec.selector.to_dict() if new.spec and new.spec.selector else None
        if old_sel != new_sel:
            # apps/v1 made selectors immutable: changing them would orphan the existing pods.
            errs.append(invalid("spec.selector", validation.GoLiteral(f"v1.LabelSelector{{MatchLabels:{new_sel}}}"),
                                "field is immutable"))
        return errs

    def validate_workload(self, obj: Workload) -> list[FieldError]:
        spec = obj.spec
        if spec is None:
            return [required("spec")]
        errs: list[FieldError] = []
        if spec.replicas is not None and spec.replicas < 0:
            errs.append(invalid("spec.replicas", spec.replicas, "must be greater than or equal to 0"))
        if spec.selector is None:
            errs.append(required("spec.selector"))
            return errs
        if not (spec.selector.match_labels or spec.selector.match_expressions):
            errs.append(invalid("spec.selector", validation.GoLiteral("v1.LabelSelector{MatchLabels:map[string]string(nil), "
                                                                       "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}"),
                                "empty selector is invalid for deployment"))
        try:
            selector = selector_from_label_selector(spec.selector)
        except SelectorError as exc:
            errs.append(invalid("spec.selector", str(exc), "invalid label selector"))
            return errs
        template = spec.template
        labels = (template.metadata.labels if template and template.metadata else None) or {}
        if template is None:
            errs.append(required("spec.template"))
            return errs
        if not selector.matches(labels):
            rendered = "map[string]string{" + ", ".join(f'"{k}":"{v}"' for k, v in sorted(labels.items())) + "}"
            errs.append(invalid("spec.template.metadata.labels", validation.GoLiteral(rendered),
                                "`selector` does not match template `labels`"))
        errs += validation.validate_labels(labels, "spec.template.metadata.labels")
        pod = _template_pod(obj)
        if pod is not None:
            for err in self.pods.validate_spec(pod):
                errs.append(replace(err, field="spec.template." + err.field))
        return errs

    def field_labels(self, obj: dict[str, Any]) -> dict[str, str]:
        fields = super().field_labels(obj)
        fields["status.replicas"] = str((obj.get("status") or {}).get("replicas", ""))
        return fields

    def supported_fields(self) -> set[str]:
        return super().supported_fields() | {"status.replicas"}


class DeploymentsStrategy(WorkloadStrategy):
    status_zero = ()  # DeploymentStatus: every field omitempty

    def set_defaults(self, obj: TypedObject) -> None:
        super().set_defaults(obj)
        assert isinstance(obj, Deployment)
        spec = obj.spec
        if spec is None:
            return
        strategy = spec.strategy or RolloutStrategy()
        strategy.type = strategy.type or "RollingUpdate"
        if strategy.type == "RollingUpdate":
            ru = strategy.rolling_update or RollingUpdateDeployment()
            ru.max_unavailable = "25%" if ru.max_unavailable is None else ru.max_unavailable
            ru.max_surge = "25%" if ru.max_surge is None else ru.max_surge
            strategy.rolling_update = ru
        spec.strategy = strategy
        if spec.revision_history_limit is None:
            spec.revision_history_limit = 10
        if spec.progress_deadline_seconds is None:
            spec.progress_deadline_seconds = 600

    def validate_workload(self, obj: Workload) -> list[FieldError]:
        errs = super().validate_workload(obj)
        assert isinstance(obj, Deployment)
        strategy = obj.spec.strategy if obj.spec else None
        if strategy is not None and strategy.type not in ("RollingUpdate", "Recreate"):
            errs.append(validation.not_supported("spec.strategy.type", strategy.type, ["Recreate", "RollingUpdate"]))
        if strategy is not None and strategy.type == "Recreate" and strategy.rolling_update is not None:
            errs.append(validation.forbidden("spec.strategy.rollingUpdate",
                                             "may not be specified when strategy `type` is 'Recreate'"))
        return errs


class ReplicaSetsStrategy(WorkloadStrategy):
    status_zero = ("replicas",)  # ReplicaSetStatus.Replicas has no omitempty


class ConfigMapStrategy(Strategy):
    has_status = False

    def set_defaults(self, obj: TypedObject) -> None:
        assert isinstance(obj, ConfigMap)
        if obj.binary_data:
            # binaryData is map[string][]byte: Go's base64 decoding (line breaks skipped, 400 on what does
            # not decode, in the Secret data wording), stored and returned canonical.
            obj.binary_data = decoding.canonical_bytes(obj.binary_data, "ConfigMap")

    def validate_create(self, obj: TypedObject) -> list[FieldError]:
        assert isinstance(obj, ConfigMap)
        errs = self.validate_meta(obj)
        # ValidateConfigMap: each key checked by IsConfigMapKey, reported at data[key] / binaryData[key].
        for wire, keys in (("data", obj.data or {}), ("binaryData", obj.binary_data or {})):
            for key in keys:
                errs += [invalid(f"{wire}[{key}]", key, p) for p in validation.config_map_key_errors(key)]
        return errs

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        return self.validate_create(new)


def scale_of(obj: dict[str, Any], group_version_kind: tuple[str, str]) -> dict[str, Any]:
    """The autoscaling/v1 Scale view of a Deployment, ReplicaSet, StatefulSet or ReplicationController."""
    meta = obj.get("metadata") or {}
    selector = (obj.get("spec") or {}).get("selector") or {}
    # A v1 ReplicationController's selector is the label map itself.
    labels = selector if group_version_kind[1] == "ReplicationController" else selector.get("matchLabels") or {}
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                         if k in meta},
            "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 0)},
            "status": {"replicas": (obj.get("status") or {}).get("replicas", 0),
                       "selector": ",".join(f"{k}={v}" for k, v in sorted(labels.items()))}}
