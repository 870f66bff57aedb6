"""policy/v1 PodDisruptionBudgets: validation as ValidatePodDisruptionBudget has it, generation counting
spec changes (the disruption controller's observedGeneration, which an eviction compares against)."""

from __future__ import annotations

from kubelab import validation
from kubelab.models import PodDisruptionBudget, TypedObject
from kubelab.selectors import SelectorError, selector_from_label_selector
from kubelab.validation import FieldError, invalid, not_supported

from .strategy import Strategy
from .workloads import int_or_percent_errors

EVICTION_POLICIES = ["AlwaysAllow", "IfHealthyBudget"]


class PodDisruptionBudgetStrategy(Strategy):
    # policy/v1 PodDisruptionBudgetStatus: the four counts without omitempty.
    status_zero = ("disruptions_allowed", "current_healthy", "desired_healthy", "expected_pods")
    counts_spec_generation = True

    def prepare_create(self, obj: TypedObject) -> None:
        super().prepare_create(obj)
        assert isinstance(obj, PodDisruptionBudget)
        obj.status = None  # podDisruptionBudgetStrategy.PrepareForCreate: the controller writes status

    def validate_create(self, obj: TypedObject) -> list[FieldError]:
        assert isinstance(obj, PodDisruptionBudget)
        return self.validate_meta(obj) + validate_spec(obj)

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        assert isinstance(new, PodDisruptionBudget)
        if subresource == "status":
            return self.validate_meta_update(new, old)
        return super().validate_update(new, old, subresource) + validate_spec(new)


def validate_spec(pdb: PodDisruptionBudget) -> list[FieldError]:
    """ValidatePodDisruptionBudgetSpec, in its order and words."""
    spec = pdb.spec
    if spec is None:
        return []
    errs: list[FieldError] = []
    if spec.min_available is not None and spec.max_unavailable is not None:
        errs.append(invalid("spec", validation.GoLiteral("policy.PodDisruptionBudgetSpec{...}"),
                            "minAvailable and maxUnavailable cannot be both set"))
    errs += int_or_percent_errors(spec.min_available, "spec.minAvailable")
    errs += int_or_percent_errors(spec.max_unavailable, "spec.maxUnavailable")
    if spec.selector is not None:
        try:
            selector_from_label_selector(spec.selector)
        except SelectorError as exc:
            errs.append(invalid("spec.selector", str(exc), "invalid label selector"))
    policy = spec.unhealthy_pod_eviction_policy
    if policy is not None and policy not in EVICTION_POLICIES:
        errs.append(not_supported("spec.unhealthyPodEvictionPolicy", policy, EVICTION_POLICIES))
    return errs
