"""User impersonation: the `Impersonate-User`, `Impersonate-Group`, `Impersonate-Uid` and
`Impersonate-Extra-<key>` headers (`kubectl --as`, `--as-group`, `--as-uid`), as kube-apiserver's
WithImpersonation filter reads them (k8s.io/apiserver/pkg/endpoints/filters/impersonation.go).

Each thing asked for is a separate authorization of the verb `impersonate` on users, groups,
serviceaccounts (a user named `system:serviceaccount:NS:NAME`), uids or userextras/<key>; only when all
are allowed does the request go on as the user they make up. `auth.py` asks `authz.py` for each verdict
and then hands the new user to every layer below; the headers are removed, as kube removes them.

Pure: headers in, requests and the resulting user out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import unquote

from starlette.datastructures import Headers

from kubelab import validation
from kubelab.tokenfile import UserInfo

from . import errors
from .requestinfo import RequestInfo

USER_HEADER = "impersonate-user"
GROUP_HEADER = "impersonate-group"
UID_HEADER = "impersonate-uid"
EXTRA_PREFIX = "impersonate-extra-"
AUTHENTICATION_GROUP = "authentication.k8s.io"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
ANONYMOUS_USER = "system:anonymous"
AUTHENTICATED_GROUP = "system:authenticated"
UNAUTHENTICATED_GROUP = "system:unauthenticated"


@dataclass(frozen=True)
class Request:
    """One thing to impersonate, as the authorization attributes kube checks for it."""

    resource: str  # users | groups | serviceaccounts | uids | userextras
    name: str
    namespace: str = ""
    subresource: str = ""  # the extra's key, for userextras
    api_group: str = ""

    def attributes(self, path: str) -> RequestInfo:
        return RequestInfo(path=path, verb="impersonate", is_resource=True, group=self.api_group,
                           resource=self.resource, subresource=self.subresource, namespace=self.namespace,
                           name=self.name)


def is_header(name: str) -> bool:
    name = name.lower()
    return name in (USER_HEADER, GROUP_HEADER, UID_HEADER) or name.startswith(EXTRA_PREFIX)


def split_service_account(username: str) -> tuple[str, str] | None:
    """serviceaccount.SplitUsername: (namespace, name) of `system:serviceaccount:NS:NAME` when both are
    valid names (a namespace is a DNS-1123 label, a service account name a subdomain), else None."""
    if not username.startswith(SERVICE_ACCOUNT_PREFIX):
        return None
    parts = username[len(SERVICE_ACCOUNT_PREFIX):].split(":")
    if len(parts) != 2:
        return None
    namespace, name = parts
    if validation.dns1123_label_errors(namespace) or validation.dns1123_subdomain_errors(name):
        return None
    return namespace, name


def requested(headers: Headers) -> list[Request]:
    """buildImpersonationRequests: what the headers ask for, in kube's order (user, groups, uid, extras).
    Groups, a uid or extras without a user are refused: kube answers that with a 500 InternalError
    ("requested [...] without impersonating a user"); kubelab with a 400, as bad input is never a 5xx
    here (RELIABILITY.md)."""
    asked: list[Request] = []
    user = headers.get(USER_HEADER) or ""
    if user:
        account = split_service_account(user)
        if account is not None:
            asked.append(Request("serviceaccounts", account[1], namespace=account[0]))
        else:
            asked.append(Request("users", user))
    others: list[Request] = [Request("groups", group) for group in headers.getlist(GROUP_HEADER)]
    uid = headers.get(UID_HEADER) or ""
    if uid:
        others.append(Request("uids", uid, api_group=AUTHENTICATION_GROUP))
    for name in dict.fromkeys(key for key in headers if key.lower().startswith(EXTRA_PREFIX)):
        key = unquote(name.lower()[len(EXTRA_PREFIX):])  # unescapeExtraKey: %-encoded bytes decoded
        others += [Request("userextras", value, subresource=key, api_group=AUTHENTICATION_GROUP)
                   for value in headers.getlist(name)]
    if others and not user:
        wanted = ", ".join(f"{r.resource} {r.name!r}" for r in others)
        raise errors.bad_request(f"requested impersonation of {wanted} without impersonating a user")
    return asked + others


def acting_as(asked: Sequence[Request], *, groups_specified: bool) -> UserInfo:
    """The user the allowed requests make up. A service account without groups asked for gets its fixed
    groups; every user but system:anonymous gets system:authenticated unless system:authenticated or
    system:unauthenticated is among the groups, and system:anonymous gets system:unauthenticated."""
    name, uid = "", ""
    groups: list[str] = []
    extra: dict[str, list[str]] = {}
    for request in asked:
        if request.resource == "serviceaccounts":
            name = f"{SERVICE_ACCOUNT_PREFIX}{request.namespace}:{request.name}"
            if not groups_specified:
                groups = ["system:serviceaccounts", f"system:serviceaccounts:{request.namespace}"]
        elif request.resource == "users":
            name = request.name
        elif request.resource == "groups":
            groups.append(request.name)
        elif request.resource == "uids":
            uid = request.name
        else:
            extra.setdefault(request.subresource, []).append(request.name)
    if name != ANONYMOUS_USER:
        if AUTHENTICATED_GROUP not in groups and UNAUTHENTICATED_GROUP not in groups:
            groups.append(AUTHENTICATED_GROUP)
    elif UNAUTHENTICATED_GROUP not in groups:
        groups.append(UNAUTHENTICATED_GROUP)
    return UserInfo(name, uid, tuple(groups), tuple((k, tuple(v)) for k, v in extra.items()))


__all__ = ["ANONYMOUS_USER", "Request", "acting_as", "is_header", "requested", "split_service_account"]
