"""RBAC escalation prevention, as kube-apiserver's policybased storage of Roles, ClusterRoles and their
bindings does it (pkg/registry/rbac/*/policybased, pkg/registry/rbac/validation): a user may write a Role
or ClusterRole only with rules it holds itself (or the `escalate` verb on it), and a binding only to a role
whose rules it holds (or the `bind` verb on it); system:masters may do both. The check sees the object as
it will be stored (after a patch is applied), which is why the registry's strategies call it (registry/
rbac.py) rather than the authorization filter; the filter leaves who is asking, with the policy and modes
it judged by, in a context variable for them (auth.py). Writes the API server makes itself (the bootstrap
policy) and writes to an open API server (no token file: AlwaysAllow) carry no asker and are not checked.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubelab import kinds, validation
from kubelab.kinds import ResourceType
from kubelab.tokenfile import MASTERS_GROUP, UserInfo

from . import authz, errors, rbac
from .requestinfo import RequestInfo

# The cluster-admin rule set: setting an aggregationRule gathers anything, so it takes all of it.
FULL_AUTHORITY: Sequence[rbac.Rule] = ({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
                                       {"verbs": ["*"], "nonResourceURLs": ["*"]})


@dataclass(frozen=True)
class Asker:
    """Who a write comes from, and what it was authorized by."""

    user: UserInfo
    policy: rbac.Policy | None
    modes: tuple[str, ...]


ASKER: contextvars.ContextVar[Asker | None] = contextvars.ContextVar("kubelab_rbac_asker", default=None)


def _allowed(asker: Asker, verb: str, rt: ResourceType, namespace: str, name: str) -> bool:
    info = RequestInfo(path="", verb=verb, is_resource=True, group=kinds.RBAC_GROUP, resource=rt.plural,
                       namespace=namespace, name=name)
    return authz.verdict(asker.user, info, policy=asker.policy, modes=asker.modes)[0]


def _confirm_no_escalation(asker: Asker, rt: ResourceType, name: str, namespace: str,
                           rules: Sequence[rbac.Rule], *, message: str | None = None) -> None:
    owner, problems = rbac.rules_for(asker.policy or rbac.Policy(), asker.user, namespace)
    missing = rbac.uncovered(owner, rules)
    if missing:
        text = message or rbac.escalation_message(asker.user, missing, problems)
        raise errors.forbidden(f"{rt.group_resource} {validation.go_quote(name)} is forbidden: {text}", rt, name)


def _exempt(asker: Asker | None) -> bool:
    """EscalationAllowed: no asker (the API server itself, an open API) or system:masters; and a chain
    without RBAC has nothing to escalate."""
    return asker is None or MASTERS_GROUP in asker.user.groups or "RBAC" not in asker.modes


def check_role(rt: ResourceType, obj: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> None:
    """A Role or ClusterRole write (`obj` as JSON, `old` as stored for an update): Forbidden unless the
    asker holds every rule, or may `escalate` it; an aggregationRule needs cluster-admin's rules."""
    asker = ASKER.get()
    if _exempt(asker):
        return
    assert asker is not None
    meta = obj.get("metadata") or {}
    name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
    if old is not None and (old.get("rules"), old.get("aggregationRule")) == (obj.get("rules"),
                                                                            obj.get("aggregationRule")):
        return  # nothing granted changes (an update of labels, annotations, finalizers)
    if _allowed(asker, "escalate", rt, namespace, name):
        return
    rules = [r for r in obj.get("rules") or [] if isinstance(r, Mapping)]
    _confirm_no_escalation(asker, rt, name, namespace, rules)
    if rt == kinds.CLUSTERROLES and obj.get("aggregationRule") is not None:
        _confirm_no_escalation(asker, rt, name, namespace, FULL_AUTHORITY,
                               message="must have cluster-admin privileges to use the aggregationRule")


def check_binding(rt: ResourceType, obj: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> None:
    """A RoleBinding or ClusterRoleBinding write: Forbidden unless the asker may `bind` the role it names
    or holds every rule of it; a role that does not exist is kube's NotFound."""
    asker = ASKER.get()
    if _exempt(asker):
        return
    assert asker is not None
    meta = obj.get("metadata") or {}
    name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
    ref = obj.get("roleRef") or {}
    if old is not None and (old.get("roleRef"), old.get("subjects")) == (ref, obj.get("subjects")):
        return  # nothing granted changes (an update of labels, annotations, finalizers)
    role_rt = kinds.CLUSTERROLES if ref.get("kind") == "ClusterRole" else kinds.ROLES
    if _allowed(asker, "bind", role_rt, namespace, str(ref.get("name") or "")):
        return
    rules, problem = rbac.role_rules(asker.policy or rbac.Policy(), ref, namespace)
    if problem:  # the role lister's NotFound, which names the kind in the singular
        singular = role_rt.kind.lower()
        role_name = str(ref.get("name") or "")
        raise errors.StatusError(404, "NotFound", f"{singular}.{kinds.RBAC_GROUP} {validation.go_quote(role_name)} not found",
                                 {"name": role_name, "group": kinds.RBAC_GROUP, "kind": singular})
    _confirm_no_escalation(asker, rt, name, namespace, rules)


__all__ = ["ASKER", "Asker", "check_binding", "check_role"]
