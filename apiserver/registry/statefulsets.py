"""apps/v1 StatefulSets: defaults and validation as kube-apiserver's (SetDefaults_StatefulSet,
ValidateStatefulSetSpec, ValidateStatefulSetUpdate), with the scale subresource on spec.replicas.

Defaults: 1 replica, podManagementPolicy OrderedReady, updateStrategy RollingUpdate with partition 0,
persistentVolumeClaimRetentionPolicy Retain/Retain, 10 revisions kept. Only replicas, ordinals, template,
updateStrategy, persistentVolumeClaimRetentionPolicy and minReadySeconds may change after creation.

updateStrategy.rollingUpdate.maxUnavailable is dropped on write unless the stored set already has it, as
kube 1.32 does with its MaxUnavailableStatefulSet feature gate off (alpha): the field is accepted and
forgotten, and a rolling update replaces one pod at a time.

volumeClaimTemplates are refused: kubelab has no volumes to bind a PersistentVolumeClaim to (no PV/PVC
objects, no provisioner), and accepting the field would promise storage the pods never get.
"""

from __future__ import annotations

from kubelab.models import (
    RollingUpdateStatefulSetStrategy,
    StatefulSet,
    StatefulSetPersistentVolumeClaimRetentionPolicy,
    StatefulSetUpdateStrategy,
    TypedObject,
)
from kubelab.validation import FieldError, forbidden, invalid, not_supported, required

from .workloads import (
    TemplateStrategy,
    default_template,
    go_int_or_string,
    immutable_selector,
    int_or_percent_errors,
    int_or_percent_value,
    nonnegative,
    parse_selector,
    validate_template,
)

RETENTION = ["Retain", "Delete"]
MUTABLE = ("replicas", "ordinals", "template", "updateStrategy", "persistentVolumeClaimRetentionPolicy",
           "minReadySeconds")
NO_VOLUME_CLAIMS = ("kubelab does not provision volumes (no PersistentVolumeClaims or PersistentVolumes are "
                    "served): a StatefulSet with volumeClaimTemplates cannot be created; mount an emptyDir or "
                    "hostPath volume from the pod template instead")


def _drop_disabled_fields(new: StatefulSet, old: StatefulSet | None) -> None:
    """dropStatefulSetDisabledFields: maxUnavailable goes unless the old object uses it."""
    def in_use(sts: StatefulSet | None) -> bool:
        strategy = sts.spec.update_strategy if sts is not None and sts.spec else None
        return bool(strategy and strategy.rolling_update and strategy.rolling_update.max_unavailable is not None)

    strategy = new.spec.update_strategy if new.spec else None
    if strategy and strategy.rolling_update and not in_use(old):
        strategy.rolling_update.max_unavailable = None


class StatefulSetStrategy(TemplateStrategy):
    status_zero = ("replicas", "available_replicas")  # StatefulSetStatus: no omitempty on these

    def prepare_create(self, obj: TypedObject) -> None:
        assert isinstance(obj, StatefulSet)
        _drop_disabled_fields(obj, None)
        super().prepare_create(obj)

    def prepare_update(self, new: TypedObject, old: TypedObject, subresource: str | None) -> None:
        assert isinstance(new, StatefulSet) and isinstance(old, StatefulSet)
        if subresource is None:
            _drop_disabled_fields(new, old)
        super().prepare_update(new, old, subresource)

    def set_defaults(self, obj: TypedObject) -> None:
        assert isinstance(obj, StatefulSet)
        spec = obj.spec
        if spec is None:
            return
        default_template(self.pods, spec.template)
        if spec.replicas is None:
            spec.replicas = 1
        spec.pod_management_policy = spec.pod_management_policy or "OrderedReady"
        strategy = spec.update_strategy or StatefulSetUpdateStrategy()
        strategy.type = strategy.type or "RollingUpdate"
        if strategy.type == "RollingUpdate":
            ru = strategy.rolling_update or RollingUpdateStatefulSetStrategy()
            ru.partition = 0 if ru.partition is None else ru.partition
            strategy.rolling_update = ru
        spec.update_strategy = strategy
        policy = spec.persistent_volume_claim_retention_policy or StatefulSetPersistentVolumeClaimRetentionPolicy()
        policy.when_deleted = policy.when_deleted or "Retain"
        policy.when_scaled = policy.when_scaled or "Retain"
        spec.persistent_volume_claim_retention_policy = policy
        if spec.revision_history_limit is None:
            spec.revision_history_limit = 10

    def validate_spec(self, obj: TypedObject) -> list[FieldError]:
        assert isinstance(obj, StatefulSet)
        spec = obj.spec
        if spec is None:
            return [required("spec")]
        errs: list[FieldError] = []
        policy = spec.pod_management_policy
        if not policy:
            errs.append(required("spec.podManagementPolicy"))
        elif policy not in ("OrderedReady", "Parallel"):
            errs.append(invalid("spec.podManagementPolicy", policy, "must be 'OrderedReady' or 'Parallel'"))
        errs += _update_strategy_errors(spec.update_strategy)
        retention = spec.persistent_volume_claim_retention_policy
        if retention is not None:
            for wire, value in (("whenDeleted", retention.when_deleted), ("whenScaled", retention.when_scaled)):
                if value not in RETENTION:
                    errs.append(not_supported(f"spec.persistentVolumeClaimRetentionPolicy.{wire}", value or "",
                                              RETENTION))
        errs += nonnegative(spec.replicas, "spec.replicas")
        errs += nonnegative(spec.min_ready_seconds, "spec.minReadySeconds")
        if spec.ordinals is not None:
            errs += nonnegative(spec.ordinals.start, "spec.ordinals.start")
        selector, selector_errs = parse_selector(spec.selector, kind="statefulset")
        errs += selector_errs
        errs += validate_template(self.pods, spec.template, selector, kind="StatefulSet")
        errs += nonnegative(spec.revision_history_limit, "spec.revisionHistoryLimit")
        if spec.volume_claim_templates:
            errs.append(forbidden("spec.volumeClaimTemplates", NO_VOLUME_CLAIMS))
        return errs

    def validate_spec_update(self, new: TypedObject, old: TypedObject) -> list[FieldError]:
        assert isinstance(new, StatefulSet) and isinstance(old, StatefulSet)
        new_spec = {k: v for k, v in (new.spec.to_dict() if new.spec else {}).items() if k not in MUTABLE}
        old_spec = {k: v for k, v in (old.spec.to_dict() if old.spec else {}).items() if k not in MUTABLE}
        if new_spec != old_spec:
            # The selector is one of them; kube says it in this one message.
            return [forbidden("spec", "updates to statefulset spec for fields other than 'replicas', 'ordinals', "
                                      "'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and "
                                      "'minReadySeconds' are forbidden")]
        return immutable_selector(new.spec.selector if new.spec else None, old.spec.selector if old.spec else None)


def _update_strategy_errors(strategy: StatefulSetUpdateStrategy | None) -> list[FieldError]:
    path = "spec.updateStrategy"
    kind = strategy.type if strategy else None
    if not kind:
        return [required(path)]
    assert strategy is not None
    ru = strategy.rolling_update
    if kind == "OnDelete":
        if ru is not None:
            return [invalid(f"{path}.rollingUpdate", ru.to_dict(), "only allowed for updateStrategy 'RollingUpdate'")]
        return []
    if kind != "RollingUpdate":
        return [invalid(path, strategy.to_dict(), "must be 'RollingUpdate' or 'OnDelete'")]
    if ru is None:
        return []
    errs = nonnegative(ru.partition, f"{path}.rollingUpdate.partition")
    if ru.max_unavailable is not None:
        errs += int_or_percent_errors(ru.max_unavailable, f"{path}.rollingUpdate.maxUnavailable")
        if int_or_percent_value(ru.max_unavailable) == 0:
            errs.append(invalid(f"{path}.rollingUpdate.maxUnavailable", go_int_or_string(ru.max_unavailable),
                                "cannot be 0"))
    return errs
