"""rbac.authorization.k8s.io/v1 Roles, ClusterRoles, RoleBindings and ClusterRoleBindings: defaults as the
v1 SetDefaults_* have them and validation as pkg/apis/rbac/validation words it, plus the binding tables
(printRoleBinding). Escalation prevention needs the asking user and runs in front of the store
(apiserver/rbacguard.py); what a rule grants is apiserver/rbac.py's."""

from __future__ import annotations

from typing import Any

from kubelab import kinds, timeutil, validation
from kubelab.models import (
    ClusterRole,
    ClusterRoleBinding,
    PolicyRule,
    Role,
    RoleBinding,
    Subject,
    TypedObject,
)
from kubelab.selectors import SelectorError, selector_from_label_selector
from kubelab.validation import FieldError, invalid, not_supported, required

from .. import rbacguard, tables
from .strategy import Strategy

GROUP = kinds.RBAC_GROUP
SUBJECT_KINDS = ["ServiceAccount", "User", "Group"]

Binding = RoleBinding | ClusterRoleBinding


class _RBACStrategy(Strategy):
    """What the four kinds share: names are ValidateRBACName (path.IsValidPathSegmentName), no status, and
    escalation prevention before validation, as kube's policybased storage wraps the standard one."""

    has_status = False
    name_check = staticmethod(validation.path_segment_name_errors)

    def validate_object(self, obj: TypedObject) -> list[FieldError]:
        raise NotImplementedError

    def guard(self, obj: TypedObject, old: TypedObject | None) -> None:
        raise NotImplementedError

    def validate_create(self, obj: TypedObject) -> list[FieldError]:
        self.guard(obj, None)
        return self.validate_object(obj)

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        # ValidateXUpdate: the object's own validation, then ValidateObjectMetaUpdate.
        self.guard(new, old)
        return self.validate_object(new) + [e for e in self.validate_meta_update(new, old)
                                            if e.field == "metadata.name"]


class _RoleStrategy(_RBACStrategy):
    def guard(self, obj: TypedObject, old: TypedObject | None) -> None:
        rbacguard.check_role(self.rt, obj.to_dict(), old.to_dict() if old is not None else None)


class RoleStrategy(_RoleStrategy):
    def validate_object(self, obj: TypedObject) -> list[FieldError]:
        assert isinstance(obj, Role)
        errs = self.validate_meta(obj)
        for i, rule in enumerate(obj.rules or []):
            errs += validate_policy_rule(rule, namespaced=True, path=f"rules[{i}]")
        return errs


class ClusterRoleStrategy(_RoleStrategy):
    def validate_object(self, obj: TypedObject) -> list[FieldError]:
        assert isinstance(obj, ClusterRole)
        errs = self.validate_meta(obj)
        for i, rule in enumerate(obj.rules or []):
            errs += validate_policy_rule(rule, namespaced=False, path=f"rules[{i}]")
        aggregation = obj.aggregation_rule
        if aggregation is not None:
            selectors = aggregation.cluster_role_selectors or []
            if not selectors:
                errs.append(required("aggregationRule.clusterRoleSelectors",
                                     "at least one clusterRoleSelector required if aggregationRule is non-nil"))
            for i, selector in enumerate(selectors):
                try:
                    selector_from_label_selector(selector)
                except SelectorError as exc:
                    errs.append(invalid(f"aggregationRule.clusterRoleSelectors[{i}]", str(exc),
                                        "invalid label selector."))
        return errs


def validate_policy_rule(rule: PolicyRule, *, namespaced: bool, path: str) -> list[FieldError]:
    """ValidatePolicyRule, in its order and words."""
    errs: list[FieldError] = []
    if not rule.verbs:
        errs.append(required(f"{path}.verbs", "verbs must contain at least one value"))
    if rule.non_resource_urls:
        urls = list(rule.non_resource_urls)
        if namespaced:
            errs.append(invalid(f"{path}.nonResourceURLs", urls, "namespaced rules cannot apply to non-resource URLs"))
        if rule.api_groups or rule.resources or rule.resource_names:
            errs.append(invalid(f"{path}.nonResourceURLs", urls,
                                "rules cannot apply to both regular resources and non-resource URLs"))
        return errs
    if not rule.api_groups:
        errs.append(required(f"{path}.apiGroups", "resource rules must supply at least one api group"))
    if not rule.resources:
        errs.append(required(f"{path}.resources", "resource rules must supply at least one resource"))
    return errs


class _BindingStrategy(_RBACStrategy):
    role_kinds: tuple[str, ...] = ("Role", "ClusterRole")

    def set_defaults(self, obj: TypedObject) -> None:
        """SetDefaults_RoleBinding / _ClusterRoleBinding and SetDefaults_Subject: the RBAC group for the role
        reference and for User and Group subjects."""
        assert isinstance(obj, RoleBinding | ClusterRoleBinding)
        if obj.role_ref is not None and not obj.role_ref.api_group:
            obj.role_ref.api_group = GROUP
        for subject in obj.subjects or []:
            if not subject.api_group and subject.kind in ("User", "Group"):
                subject.api_group = GROUP

    def guard(self, obj: TypedObject, old: TypedObject | None) -> None:
        rbacguard.check_binding(self.rt, obj.to_dict(), old.to_dict() if old is not None else None)

    def validate_object(self, obj: TypedObject) -> list[FieldError]:
        assert isinstance(obj, RoleBinding | ClusterRoleBinding)
        errs = self.validate_meta(obj)
        ref = obj.role_ref
        api_group = (ref.api_group if ref else None) or ""
        kind = (ref.kind if ref else None) or ""
        name = (ref.name if ref else None) or ""
        if api_group != GROUP:
            errs.append(not_supported("roleRef.apiGroup", api_group, [GROUP]))
        if kind not in self.role_kinds:
            errs.append(not_supported("roleRef.kind", kind, list(self.role_kinds)))
        if not name:
            errs.append(required("roleRef.name"))
        else:
            errs += [invalid("roleRef.name", name, p) for p in validation.path_segment_name_errors(name)]
        for i, subject in enumerate(obj.subjects or []):
            errs += validate_subject(subject, namespaced=self.rt.namespaced, path=f"subjects[{i}]")
        return errs

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        assert isinstance(new, RoleBinding | ClusterRoleBinding) and isinstance(old, RoleBinding | ClusterRoleBinding)
        errs = super().validate_update(new, old, subresource)
        if _ref_tuple(new) != _ref_tuple(old):
            ref = new.role_ref
            errs.append(invalid("roleRef", validation.GoLiteral(
                f"rbac.RoleRef{{APIGroup:{validation.go_quote((ref.api_group if ref else None) or '')}, "
                f"Kind:{validation.go_quote((ref.kind if ref else None) or '')}, "
                f"Name:{validation.go_quote((ref.name if ref else None) or '')}}}"), "cannot change roleRef"))
        return errs


class RoleBindingStrategy(_BindingStrategy):
    role_kinds = ("Role", "ClusterRole")


class ClusterRoleBindingStrategy(_BindingStrategy):
    role_kinds = ("ClusterRole",)


def _ref_tuple(obj: Binding) -> tuple[str, str, str]:
    ref = obj.role_ref
    return ((ref.api_group if ref else None) or "", (ref.kind if ref else None) or "", (ref.name if ref else None) or "")


def validate_subject(subject: Subject, *, namespaced: bool, path: str) -> list[FieldError]:
    """ValidateRoleBindingSubject, in its order and words."""
    errs: list[FieldError] = []
    name = subject.name or ""
    if not name:
        errs.append(required(f"{path}.name"))
    if subject.kind == "ServiceAccount":
        if name:
            errs += [invalid(f"{path}.name", name, p) for p in validation.dns1123_subdomain_errors(name)]
        if subject.api_group:
            errs.append(not_supported(f"{path}.apiGroup", subject.api_group, [""]))
        if not namespaced and not subject.namespace:
            errs.append(required(f"{path}.namespace"))
    elif subject.kind in ("User", "Group"):
        if subject.api_group != GROUP:
            errs.append(not_supported(f"{path}.apiGroup", subject.api_group or "", [GROUP]))
    else:
        errs.append(not_supported(f"{path}.kind", subject.kind or "", SUBJECT_KINDS))
    return errs


# --- tables ------------------------------------------------------------------------------------------

def subjects_strings(subjects: list[dict[str, Any]]) -> tuple[list[str], list[str], list[str]]:
    """rbac.SubjectsStrings: users, groups and service accounts (`namespace/name`) of a binding."""
    users, groups, accounts = [], [], []
    for subject in subjects:
        if not isinstance(subject, dict):
            continue
        kind, name = subject.get("kind"), str(subject.get("name") or "")
        if kind == "User":
            users.append(name)
        elif kind == "Group":
            groups.append(name)
        elif kind == "ServiceAccount":
            accounts.append(f"{subject.get('namespace') or ''}/{name}")
    return users, groups, accounts


def binding_row(obj: dict[str, Any]) -> list[Any]:
    """printRoleBinding / printClusterRoleBinding: the role as `Kind/name`, then (wide) the subjects."""
    ref = obj.get("roleRef") or {}
    users, groups, accounts = subjects_strings(obj.get("subjects") or [])
    meta = obj.get("metadata") or {}
    return [meta.get("name"), f"{ref.get('kind') or ''}/{ref.get('name') or ''}",
            timeutil.age(meta.get("creationTimestamp")), ", ".join(users), ", ".join(groups), ", ".join(accounts)]


BINDING_COLUMNS: list[tables.Column] = [
    tables.NAME, ("Role", "string", 0, ""), tables.AGE, ("Users", "string", 1, ""), ("Groups", "string", 1, ""),
    ("ServiceAccounts", "string", 1, "")]
# Roles and ClusterRoles print as the default printer does: NAME, CREATED AT (roleColumnDefinitions).
tables.register(kinds.ROLEBINDINGS, BINDING_COLUMNS, binding_row)
tables.register(kinds.CLUSTERROLEBINDINGS, BINDING_COLUMNS, binding_row)
