"""Authorization: kube-apiserver's authorizer chain (--authorization-mode, `Node,RBAC` by default when a
token file is configured, as kubeadm sets it), the Node authorizer with the system:node rules, and the
NodeRestriction admission plugin. Everything here is pure: decisions from a request's attributes, the
RBAC policy (rbac.py), its body and the stored object it touches, which `auth.py` gathers.

* system:masters may do everything, before any mode is asked (kube's privileged-group authorizer);
* anonymous requests reach only /healthz, /livez, /readyz and /version (system:public-info-viewer);
* `Node`: a user named `system:node:<name>` in group `system:nodes` is a node: it may read everything, and
  write only what a kubelet needs, as the system:node rules plus the Node authorizer allow and
  NodeRestriction narrows (plugin/pkg/auth/authorizer/node, plugin/pkg/admission/noderestriction):
  its own Node and Node status, its own Lease in kube-node-lease, the status of pods bound to it, the
  delete of pods bound to it, mirror pods bound to it, and events;
* `RBAC`: what the user's Roles and ClusterRoles allow (rbac.py); a service account gets nothing until
  something binds it, as in kube;
* `AlwaysAllow` / `AlwaysDeny`: kube's, for labs that want every authenticated user to be a cluster-admin
  (kubelab's behaviour before RBAC) or nobody.

Impersonation (`kubectl --as`) is the `impersonate` verb on users, groups, serviceaccounts, uids and
userextras, authorized like any other (impersonation.py). The verdict is taken on the request's one
RequestInfo (requestinfo.py), the same record the router dispatches on.

Differences from kube, on purpose: node reads are not narrowed (kube's Node authorizer limits which
ConfigMaps, Secrets and Leases a node may get or list); NodeRestriction's rules on what a node may
change in its own Node (taints, labels under kubernetes.io and k8s.io) are not enforced.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from kubelab import tracing
from kubelab.tokenfile import MASTERS_GROUP, NODE_USER_PREFIX, NODES_GROUP, UserInfo

from . import defaults, errors, rbac
from .impersonation import AUTHENTICATED_GROUP
from .requestinfo import READ_VERBS, RequestInfo

# system:public-info-viewer, bound to system:unauthenticated and system:authenticated.
PUBLIC_PATHS = frozenset({"/healthz", "/livez", "/readyz", "/version", "/version/"})
NODE_LEASE_NAMESPACE = "kube-node-lease"
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"

# The writes bootstrappolicy.NodeRules grants (reads are all allowed here): (group, resource) -> verbs.
NODE_WRITES: Mapping[tuple[str, str], frozenset[str]] = {
    ("", "nodes"): frozenset({"create", "update", "patch"}),
    ("", "nodes/status"): frozenset({"update", "patch"}),
    ("", "pods"): frozenset({"create", "delete"}),
    ("", "pods/status"): frozenset({"update", "patch"}),
    ("", "pods/eviction"): frozenset({"create"}),
    # kubelet asks for its pods' projected tokens; NodeRestriction narrows it to pods on the node.
    ("", "serviceaccounts/token"): frozenset({"create"}),
    ("", "events"): frozenset({"create", "update", "patch"}),
    ("events.k8s.io", "events"): frozenset({"create", "update", "patch"}),
    ("coordination.k8s.io", "leases"): frozenset({"get", "create", "update", "patch", "delete"}),
    # A kubelet rotating its client certificate requests a new one (and reads it back, as every read).
    ("certificates.k8s.io", "certificatesigningrequests"): frozenset({"create"}),
    # system:basic-user, which every authenticated user has: may ask what it may do (kubectl auth can-i).
    ("authorization.k8s.io", "selfsubjectaccessreviews"): frozenset({"create"}),
    ("authentication.k8s.io", "selfsubjectreviews"): frozenset({"create"}),  # kubectl auth whoami
    # system:node's "needed to check API access" rule: a kubelet authenticates its own API's callers.
    ("authentication.k8s.io", "tokenreviews"): frozenset({"create"}),
    # kubelab's own: a node's proxy agent reports its syncs for `kubelab trace` (apiserver/traces.py).
    (tracing.GROUP, "traces"): frozenset({"create"}),
}


# What system:node's rules do not give a node even to read: a kubelet has no business running commands
# in, attaching to, forwarding to or proxying to pods (its own or others'), nor proxying to nodes.
NODE_FORBIDDEN_READS = frozenset({("", "pods/exec"), ("", "pods/attach"), ("", "pods/portforward"),
                                  ("", "pods/proxy"), ("", "services/proxy"), ("", "nodes/proxy")})
# Subresources whose WebSocket GET also needs `create` (kube 1.30+, AuthorizePodWebsocketUpgradeCreatePermission):
# a GET that upgrades writes to the pod as much as a POST does.
UPGRADE_NEEDS_CREATE = frozenset({"exec", "attach", "portforward"})


def upgrade_create_check(info: RequestInfo, *, websocket: bool) -> RequestInfo | None:
    """The extra `create` a WebSocket GET of pods/exec, attach or portforward is authorized for, or None."""
    if not websocket or info.verb != "get" or info.resource != "pods" or info.group or \
            info.subresource not in UPGRADE_NEEDS_CREATE:
        return None
    return dataclasses.replace(info, verb="create")


def node_name(user: UserInfo) -> str | None:
    """nodeidentifier.NodeIdentity: the node a user is ("" if it claims to be one but names none), or
    None for a user that is not a node."""
    if not user.name.startswith(NODE_USER_PREFIX) or NODES_GROUP not in user.groups:
        return None
    return user.name[len(NODE_USER_PREFIX):]


# kube-apiserver's --authorization-mode values kubelab serves (ABAC and Webhook are not served).
MODES = ("AlwaysAllow", "AlwaysDeny", "Node", "RBAC")
DEFAULT_MODES = defaults.AUTHORIZATION_MODES  # what kubeadm sets, and kubelab's default when tokens are on
ALWAYS_DENY_REASON = "Everything is forbidden."


def parse_modes(text: str) -> tuple[str, ...]:
    """--authorization-mode: a comma list of MODES, each at most once (ValueError in kube's words)."""
    modes = tuple(m.strip() for m in text.split(",") if m.strip())
    if not modes:
        raise ValueError("at least one authorization-mode must be passed")
    for mode in modes:
        if mode not in MODES:
            raise ValueError(f"authorization-mode {mode!r} is not a valid mode")
    if len(set(modes)) != len(modes):
        raise ValueError(f"authorization-mode {','.join(modes)!r} has mode specified more than once")
    return modes


def verdict(user: UserInfo, info: RequestInfo, *, policy: rbac.Policy | None,
            modes: tuple[str, ...] = DEFAULT_MODES) -> tuple[bool, str]:
    """kube-apiserver's authorizer chain: whether `user` may do what `info` describes, and the reason of a
    refusal ("" when no authorizer gave one). system:masters is allowed everything first (the privileged
    group authorizer kube-apiserver puts before the configured ones); a user outside system:authenticated
    (system:anonymous, or whoever impersonates system:unauthenticated) may get the public paths whatever
    the modes say (anonymous requests reach nothing else: auth.py); then each mode in order, as
    union.New: the first that allows decides, and the refusal joins their reasons, one a line."""
    if MASTERS_GROUP in user.groups:
        return True, ""
    if AUTHENTICATED_GROUP not in user.groups and info.verb == "get" and info.path in PUBLIC_PATHS:
        return True, ""
    reasons: list[str] = []
    for mode in modes:
        if mode == "AlwaysAllow":
            return True, ""
        if mode == "AlwaysDeny":
            reasons.append(ALWAYS_DENY_REASON)
            continue
        if mode == "Node":
            node = node_name(user)
            if node is None:
                continue
            allowed, reason = node_verdict(node, info)
        else:
            allowed, reason = rbac.authorize(policy or rbac.Policy(), user, info)
        if allowed:
            return True, ""
        if reason:
            reasons.append(reason)
    return False, "\n".join(reasons)


def authorize(user: UserInfo, info: RequestInfo, *, policy: rbac.Policy | None,
              modes: tuple[str, ...] = DEFAULT_MODES) -> errors.StatusError | None:
    """The request's verdict before its body is looked at: None to go on, else kube's 403."""
    allowed, reason = verdict(user, info, policy=policy, modes=modes)
    return None if allowed else authorizer_denial(user, info, reason)


# --- messages --------------------------------------------------------------------------------------

def forbidden(info: RequestInfo, name: str, message: str) -> errors.StatusError:
    """apierrors.NewForbidden(groupResource, name, err)."""
    details: dict[str, Any] = {"kind": info.resource} if info.is_resource else {}
    if name:
        details["name"] = name
    if info.group:
        details["group"] = info.group
    if not info.is_resource:
        text = f"forbidden: {message}"
    elif name:
        text = f'{info.group_resource} "{name}" is forbidden: {message}'
    else:
        text = f"{info.group_resource} is forbidden: {message}"
    return errors.StatusError(403, "Forbidden", text, details)


def authorizer_denial(user: UserInfo, info: RequestInfo, reason: str = "") -> errors.StatusError:
    """responsewriters.Forbidden: `User "x" cannot <verb> resource "<res>" in API group "<g>" ...`."""
    if not info.is_resource:
        message = f'User "{user.name}" cannot {info.verb} path "{info.path}"'
    else:
        resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
        where = f'in the namespace "{info.namespace}"' if info.namespace else "at the cluster scope"
        message = f'User "{user.name}" cannot {info.verb} resource "{resource}" in API group "{info.group}" {where}'
    if reason:
        message = f"{message}: {reason}"
    return forbidden(info, info.name, message)


# --- the Node authorizer (with system:node's rules) ----------------------------------------------

def authorize_node(user: UserInfo, node: str, info: RequestInfo) -> errors.StatusError | None:
    """The request's verdict before its body is looked at: None to go on, else the 403."""
    allowed, reason = node_verdict(node, info)
    return None if allowed else authorizer_denial(user, info, reason)


def node_verdict(node: str, info: RequestInfo) -> tuple[bool, str]:
    """The Node authorizer's decision and its reason ("" when no rule allows the request at all)."""
    resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
    if info.is_resource and (info.group, resource) in NODE_FORBIDDEN_READS:
        return False, ""
    if not info.is_resource or info.verb in READ_VERBS:
        return True, ""  # kubelab lets nodes read everything (see the module docstring)
    if (info.group, resource) == ("coordination.k8s.io", "leases"):
        return _lease_verdict(node, info)
    return info.verb in NODE_WRITES.get((info.group, resource), frozenset()), ""


def _lease_verdict(node: str, info: RequestInfo) -> tuple[bool, str]:
    """NodeAuthorizer.authorizeLease."""
    if info.verb not in NODE_WRITES[("coordination.k8s.io", "leases")]:
        return False, "can only get, create, update, patch, or delete a node lease"
    if info.namespace != NODE_LEASE_NAMESPACE:
        return False, f'can only access leases in the "{NODE_LEASE_NAMESPACE}" system namespace'
    # The name is not known on create; NodeRestriction checks it then (admit_node_write).
    if info.verb != "create" and info.name != node:
        return False, "can only access node lease with the same name as the requesting node"
    return True, ""


# --- NodeRestriction -------------------------------------------------------------------------------

def object_name(body: Any) -> str:
    """The name admission reports for a create: the object's name, its generateName, else "Unknown"."""
    meta = body.get("metadata") if isinstance(body, dict) else None
    if isinstance(meta, dict):
        for key in ("name", "generateName"):
            if isinstance(meta.get(key), str) and meta[key]:
                return str(meta[key])
    return "Unknown"


def admit_node_write(node: str, info: RequestInfo, *, body: Any = None, stored: dict[str, Any] | None = None,
                     node_uid: str | None = None) -> errors.StatusError | None:
    """NodeRestriction's Admit for a write the authorizer let through. `body` is the decoded request
    body (creates), `stored` the object as stored (pod deletes and pod status writes; None when it does
    not exist, which the registry then answers with 404), `node_uid` the uid of the node's own Node
    (mirror pod creates)."""
    creating = info.verb == "create"
    name = object_name(body) if creating else info.name
    if not node:
        return forbidden(info, name, f'could not determine node from user "{NODE_USER_PREFIX}"')
    if info.is_resource and (info.group, info.resource) == ("", "nodes"):
        if name != node:
            return forbidden(info, name, f'node "{node}" is not allowed to modify node "{name}"')
        return None
    if (info.group, info.resource) == ("coordination.k8s.io", "leases"):
        if info.namespace != NODE_LEASE_NAMESPACE:
            return forbidden(info, name, f'can only access leases in the "{NODE_LEASE_NAMESPACE}" system namespace')
        if name != node:
            return forbidden(info, name, "can only access node lease with the same name as the requesting node")
        return None
    if (info.group, info.resource, info.subresource) == ("", "serviceaccounts", "token") and creating:
        problem = _token_request_problem(node, body, stored)
        return forbidden(info, info.name, problem) if problem else None
    if (info.group, info.resource) != ("", "pods"):
        return None
    if info.subresource == "status":
        if stored is not None and (stored.get("spec") or {}).get("nodeName") != node:
            return forbidden(info, name, f'node "{node}" can only update pod status for pods with spec.nodeName '
                                         "set to itself")
        return None
    if info.subresource:
        return forbidden(info, name, f"unexpected pod subresource \"{info.subresource}\", only 'status' and "
                                     "'eviction' are allowed")
    if info.verb == "delete":
        if stored is not None and (stored.get("spec") or {}).get("nodeName") != node:
            return forbidden(info, name, f'node "{node}" can only delete pods with spec.nodeName set to itself')
        return None
    if creating:
        problem = _mirror_pod_problem(node, body if isinstance(body, dict) else {}, node_uid)
        return forbidden(info, name, problem) if problem else None
    return forbidden(info, name, f'unexpected operation "{info.verb.upper()}", node "{node}" can only create and '
                                 "delete mirror pods")


def bound_pod_name(body: Any) -> str | None:
    """The pod a TokenRequest body binds its token to (None: bound to no pod)."""
    spec = body.get("spec") if isinstance(body, dict) else None
    ref = spec.get("boundObjectRef") if isinstance(spec, dict) else None
    if not isinstance(ref, dict) or (ref.get("apiVersion"), ref.get("kind")) != ("v1", "Pod") or not ref.get("name"):
        return None
    return str(ref["name"])


def _token_request_problem(node: str, body: Any, pod: dict[str, Any] | None) -> str | None:
    """admitServiceAccount: a node's TokenRequest must bind the token to a pod, by uid, scheduled on the
    node. `pod` is the bound pod as stored (None when missing: the registry then answers its 404)."""
    if bound_pod_name(body) is None:
        return "node requested token not bound to a pod"
    uid = body["spec"]["boundObjectRef"].get("uid")
    if not uid:
        return "node requested token with a pod binding without a uid"
    if pod is None:
        return None
    if (pod.get("metadata") or {}).get("uid") != uid:
        return (f"the UID in the bound object reference ({uid}) does not match the UID in record. The object might "
                "have been deleted and then recreated")
    if (pod.get("spec") or {}).get("nodeName") != node:
        return "node requested token bound to a pod scheduled on a different node"
    return None


def _mirror_pod_problem(node: str, pod: dict[str, Any], node_uid: str | None) -> str | None:
    """admitPodCreate: only mirror pods, bound to this node, owned by its Node, referencing nothing."""
    meta: dict[str, Any] = pod["metadata"] if isinstance(pod.get("metadata"), dict) else {}
    spec: dict[str, Any] = pod["spec"] if isinstance(pod.get("spec"), dict) else {}
    if MIRROR_POD_ANNOTATION not in (meta.get("annotations") or {}):
        return (f'pod does not have "{MIRROR_POD_ANNOTATION}" annotation, node "{node}" can only create mirror '
                "pods")
    if spec.get("nodeName") != node:
        return f'node "{node}" can only create pods with spec.nodeName set to itself'
    owners = meta.get("ownerReferences") or []
    if not isinstance(owners, list) or len(owners) > 1:
        return f'node "{node}" can only create pods with a single owner reference set to itself'
    if not owners:
        return f'node "{node}" can only create pods with an owner reference set to itself'
    owner = owners[0] if isinstance(owners[0], dict) else {}
    if (owner.get("apiVersion"), owner.get("kind"), owner.get("name")) != ("v1", "Node", node):
        return f'node "{node}" can only create pods with an owner reference set to itself'
    if owner.get("controller") is not True:
        return f'node "{node}" can only create pods with a controller owner reference set to itself'
    if owner.get("blockOwnerDeletion") is True:
        return f'node "{node}" must not set blockOwnerDeletion on an owner reference'
    if owner.get("uid") != node_uid:
        return f"node {node} UID mismatch: expected {owner.get('uid')} got {node_uid}"
    if spec.get("serviceAccountName"):
        return f'node "{node}" can not create pods that reference a service account'
    for volume in spec.get("volumes") or []:
        if not isinstance(volume, dict):
            continue
        if "secret" in volume:
            return f'node "{node}" can not create pods that reference secrets'
        if "configMap" in volume:
            return f'node "{node}" can not create pods that reference configmaps'
        if "persistentVolumeClaim" in volume:
            return f'node "{node}" can not create pods that reference persistentvolumeclaims'
    return None
