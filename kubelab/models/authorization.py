"""authorization.k8s.io/v1: the SelfSubjectAccessReview `kubectl auth can-i` asks with; authentication.k8s.io/v1:
the SelfSubjectReview `kubectl auth whoami` asks with, and the TokenReview a webhook asks with. Never stored."""

from __future__ import annotations

from typing import Any

from .base import Model
from .meta import TypedObject


class ResourceAttributes(Model):
    namespace: str | None = None
    verb: str | None = None
    group: str | None = None
    version: str | None = None
    resource: str | None = None
    subresource: str | None = None
    name: str | None = None


class NonResourceAttributes(Model):
    path: str | None = None
    verb: str | None = None


class SelfSubjectAccessReviewSpec(Model):
    resource_attributes: ResourceAttributes | None = None
    non_resource_attributes: NonResourceAttributes | None = None


class SubjectAccessReviewStatus(Model):
    allowed: bool = False
    denied: bool | None = None
    reason: str | None = None
    evaluation_error: str | None = None


class SelfSubjectAccessReview(TypedObject):
    spec: SelfSubjectAccessReviewSpec | None = None
    status: SubjectAccessReviewStatus | None = None


class SelfSubjectReview(TypedObject):
    status: dict[str, Any] | None = None


class TokenReview(TypedObject):
    """authentication.k8s.io/v1 TokenReview: a webhook or proxy asks who a bearer token is. Never stored."""

    spec: dict[str, Any] | None = None
    status: dict[str, Any] | None = None


class SubjectAccessReviewSpec(Model):
    resource_attributes: ResourceAttributes | None = None
    non_resource_attributes: NonResourceAttributes | None = None
    user: str | None = None
    groups: list[str] | None = None
    extra: dict[str, list[str]] | None = None
    uid: str | None = None


class SubjectAccessReview(TypedObject):
    """authorization.k8s.io/v1 SubjectAccessReview (and LocalSubjectAccessReview): may this user do this?"""

    spec: SubjectAccessReviewSpec | None = None
    status: SubjectAccessReviewStatus | None = None


class LocalSubjectAccessReview(SubjectAccessReview):
    pass


class SelfSubjectRulesReviewSpec(Model):
    namespace: str | None = None


class SelfSubjectRulesReview(TypedObject):
    """authorization.k8s.io/v1 SelfSubjectRulesReview: what may I do in this namespace (`kubectl auth can-i --list`)."""

    spec: SelfSubjectRulesReviewSpec | None = None
    status: dict[str, Any] | None = None
