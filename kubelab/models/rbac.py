"""rbac.authorization.k8s.io/v1 Role, ClusterRole, RoleBinding and ClusterRoleBinding: who may do what."""

from __future__ import annotations

from .base import Model
from .meta import LabelSelector, TypedObject


class PolicyRule(Model):
    verbs: list[str] | None = None
    api_groups: list[str] | None = None
    resources: list[str] | None = None
    resource_names: list[str] | None = None
    non_resource_urls: list[str] | None = None


class AggregationRule(Model):
    cluster_role_selectors: list[LabelSelector] | None = None


class Subject(Model):
    kind: str | None = None
    api_group: str | None = None
    name: str | None = None
    namespace: str | None = None


class RoleRef(Model):
    api_group: str | None = None
    kind: str | None = None
    name: str | None = None


class Role(TypedObject):
    rules: list[PolicyRule] | None = None


class ClusterRole(TypedObject):
    rules: list[PolicyRule] | None = None
    aggregation_rule: AggregationRule | None = None


class RoleBinding(TypedObject):
    subjects: list[Subject] | None = None
    role_ref: RoleRef | None = None


class ClusterRoleBinding(TypedObject):
    subjects: list[Subject] | None = None
    role_ref: RoleRef | None = None
