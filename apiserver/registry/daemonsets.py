"""apps/v1 DaemonSets and ControllerRevisions: defaults and validation as kube-apiserver's.

A DaemonSet defaults to updateStrategy RollingUpdate with maxUnavailable 1 and maxSurge 0, and keeps 10
revisions (SetDefaults_DaemonSet). ValidateDaemonSetSpec's checks and words: a non-empty selector that
selects the template's labels, restartPolicy Always, exactly one of maxUnavailable and maxSurge non-zero.
ControllerRevisions (the DaemonSet and StatefulSet controllers' template history, which `kubectl rollout
history/undo` read) need data, and neither their data nor their revision may change.
"""

from __future__ import annotations

from kubelab.models import (
    ControllerRevision,
    DaemonSet,
    DaemonSetUpdateStrategy,
    RollingUpdateDaemonSet,
    TypedObject,
)
from kubelab.validation import FieldError, GoLiteral, go_quote, invalid, not_supported, required

from .strategy import Strategy
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

UPDATE_STRATEGIES = ["RollingUpdate", "OnDelete"]


class DaemonSetStrategy(TemplateStrategy):
    # DaemonSetStatus: the four counts without omitempty.
    status_zero = ("current_number_scheduled", "number_misscheduled", "desired_number_scheduled", "number_ready")

    def set_defaults(self, obj: TypedObject) -> None:
        assert isinstance(obj, DaemonSet)
        spec = obj.spec
        if spec is None:
            return
        default_template(self.pods, spec.template)
        strategy = spec.update_strategy or DaemonSetUpdateStrategy()
        strategy.type = strategy.type or "RollingUpdate"
        if strategy.type == "RollingUpdate":
            ru = strategy.rolling_update or RollingUpdateDaemonSet()
            ru.max_unavailable = 1 if ru.max_unavailable is None else ru.max_unavailable
            ru.max_surge = 0 if ru.max_surge is None else ru.max_surge
            strategy.rolling_update = ru
        spec.update_strategy = strategy
        if spec.revision_history_limit is None:
            spec.revision_history_limit = 10

    def validate_spec(self, obj: TypedObject) -> list[FieldError]:
        assert isinstance(obj, DaemonSet)
        spec = obj.spec
        if spec is None:
            return [required("spec")]
        selector, errs = parse_selector(spec.selector, kind="daemonset")
        errs += validate_template(self.pods, spec.template, selector, kind="DaemonSet")
        errs += nonnegative(spec.min_ready_seconds, "spec.minReadySeconds")
        errs += _update_strategy_errors(spec.update_strategy)
        errs += nonnegative(spec.revision_history_limit, "spec.revisionHistoryLimit")
        return errs

    def validate_spec_update(self, new: TypedObject, old: TypedObject) -> list[FieldError]:
        assert isinstance(new, DaemonSet) and isinstance(old, DaemonSet)
        return immutable_selector(new.spec.selector if new.spec else None, old.spec.selector if old.spec else None)


def _update_strategy_errors(strategy: DaemonSetUpdateStrategy | None) -> list[FieldError]:
    """ValidateDaemonSetUpdateStrategy and ValidateRollingUpdateDaemonSet."""
    path = "spec.updateStrategy"
    kind = strategy.type if strategy else None
    if kind == "OnDelete":
        return []
    if kind != "RollingUpdate":
        # Go prints the struct (%#v); a rollingUpdate given with an unknown type prints as a pointer.
        ru_text = "(*apps.RollingUpdateDaemonSet)(nil)" if not (strategy and strategy.rolling_update) else \
            "&apps.RollingUpdateDaemonSet{...}"
        literal = GoLiteral(f"apps.DaemonSetUpdateStrategy{{Type:{go_quote(kind or '')}, RollingUpdate:{ru_text}}}")
        return [not_supported(path, literal, UPDATE_STRATEGIES)]
    assert strategy is not None
    ru = strategy.rolling_update
    if ru is None:
        return [required(f"{path}.rollingUpdate")]
    errs = int_or_percent_errors(ru.max_unavailable, f"{path}.rollingUpdate.maxUnavailable")
    errs += int_or_percent_errors(ru.max_surge, f"{path}.rollingUpdate.maxSurge")
    has_unavailable = int_or_percent_value(ru.max_unavailable) != 0
    has_surge = int_or_percent_value(ru.max_surge) != 0
    if has_unavailable and has_surge:
        errs.append(invalid(f"{path}.rollingUpdate.maxSurge", go_int_or_string(ru.max_surge),
                            "may not be set when maxUnavailable is non-zero"))
    elif not has_unavailable and not has_surge:
        errs.append(required(f"{path}.rollingUpdate.maxUnavailable", "cannot be 0 when maxSurge is 0"))
    return errs


class ControllerRevisionStrategy(Strategy):
    has_status = False

    def validate_create(self, obj: TypedObject) -> list[FieldError]:
        assert isinstance(obj, ControllerRevision)
        errs = self.validate_meta(obj)
        if obj.data is None:
            errs.append(required("data", "data is mandatory"))
        errs += nonnegative(obj.revision, "revision")
        return errs

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        assert isinstance(new, ControllerRevision) and isinstance(old, ControllerRevision)
        errs = self.validate_meta_update(new, old)
        if new.data is None:
            errs.append(required("data", "data is mandatory"))
        errs += nonnegative(new.revision, "revision")
        if new.data != old.data:
            errs.append(invalid("data", new.data, "field is immutable"))
        return errs
