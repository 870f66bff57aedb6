"""Authentication and authorization, as one ASGI middleware in front of every route (app.py adds it when
the API server is given a token file).

Authentication is kube-apiserver's static token file with bearer tokens
(`Authorization: Bearer <token>`, bearertoken.Authenticator): a header without a bearer token leaves
the request anonymous, a bearer token that is not in the file is a 401. Anonymous requests reach only
the public paths (/healthz, /livez, /readyz, /version: system:public-info-viewer); anything else is
a 401, as kube-apiserver answers when anonymous access is limited to those endpoints
(AnonymousAuthConfigurableEndpoints). Impersonation headers are honoured for users allowed to
impersonate and refused with kube's 403 for the others (impersonation.py). Authorization and admission
are `authz.py`'s, on the request's one RequestInfo (requestinfo.py), the record the router dispatches on;
admission of node writes runs after routing (admission.py), as kube's admission runs in the handler.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from kubelab.tokenfile import UserInfo

from . import admission, codecs, errors, impersonation, requestinfo
from .admission import NodeAdmission
from .authz import (
    PUBLIC_PATHS,
    authorize,
    authorizer_denial,
    may_impersonate,
    node_name,
    upgrade_create_check,
)

AUTHENTICATED_GROUP = impersonation.AUTHENTICATED_GROUP
# Who an anonymous request on a public path is, as kube's anonymous authenticator names it.
ANONYMOUS = UserInfo(impersonation.ANONYMOUS_USER, "", (impersonation.UNAUTHENTICATED_GROUP,))
USER_SCOPE_KEY = "kubelab.user"  # the authenticated UserInfo, in the ASGI scope, for the layers below


class Unauthorized(Exception):
    """A bearer token was given and it is not a valid one."""


def authenticate(header: str | None, tokens: Mapping[str, UserInfo]) -> UserInfo | None:
    """The user a request's Authorization header names, None when it names none (anonymous)."""
    auth = (header or "").strip()
    if not auth:
        return None
    parts = auth.split(" ")
    if len(parts) < 2 or parts[0].lower() != "bearer" or not parts[1]:
        return None
    user = tokens.get(parts[1])
    if user is None:
        raise Unauthorized("invalid bearer token")
    if AUTHENTICATED_GROUP in user.groups:
        return user
    return UserInfo(user.name, user.uid, (*user.groups, AUTHENTICATED_GROUP))


def unauthorized() -> errors.StatusError:
    return errors.StatusError(401, "Unauthorized", "Unauthorized")


class AuthMiddleware:
    """Authenticate, impersonate when asked and allowed, then authorize on the request's one RequestInfo;
    a node's request carries its NodeRestriction admission on to the router (admission.py). `state` is
    the app's state, whose `registry` answers the lookups admission needs."""

    def __init__(self, app: ASGIApp, *, tokens: Mapping[str, UserInfo], state: Any) -> None:
        self.app = app
        self.tokens = tokens
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        try:
            user = authenticate(headers.get("authorization"), self.tokens)
        except Unauthorized:
            await self._refuse(unauthorized(), scope, receive, send)
            return
        info = requestinfo.of(scope)
        if user is None:
            # Anonymous requests are authenticated (as system:anonymous) for the public paths only; anywhere
            # else they are not authenticated at all (AnonymousAuthConfigurableEndpoints): 401.
            if not (info.verb == "get" and info.path in PUBLIC_PATHS):
                await self._refuse(unauthorized(), scope, receive, send)
                return
            user = ANONYMOUS
        try:
            user = self._impersonate(user, headers, scope)
            scope[USER_SCOPE_KEY] = user
            refusal = authorize(user, info)
            also = upgrade_create_check(info, websocket=headers.get("upgrade", "").lower() == "websocket")
            if refusal is None and also is not None:
                refusal = authorize(user, also)
            node = node_name(user)
            if node is not None:  # NodeRestriction runs once the router has found the resource
                scope[admission.SCOPE_KEY] = NodeAdmission(node, self.state.registry)
        except errors.StatusError as exc:
            refusal = exc
        if refusal is not None:
            await self._refuse(refusal, scope, receive, send)
            return
        await self.app(scope, receive, send)

    @staticmethod
    def _impersonate(user: UserInfo, headers: Headers, scope: Scope) -> UserInfo:
        """WithImpersonation: the user the request goes on as. Every thing asked for is authorized on its
        own (the 403 names the first refused); the headers are then removed for the layers below."""
        asked = impersonation.requested(headers)
        if not asked:
            return user
        for request in asked:
            if not may_impersonate(user):
                raise authorizer_denial(user, request.attributes(scope["path"]))
        scope["headers"] = [(k, v) for k, v in scope["headers"] if not impersonation.is_header(k.decode("latin-1"))]
        return impersonation.acting_as(asked, groups_specified=bool(headers.getlist(impersonation.GROUP_HEADER)))

    @staticmethod
    async def _refuse(exc: errors.StatusError, scope: Scope, receive: Receive, send: Send) -> None:
        response = codecs.status_response(exc)
        await response(scope, receive, send)


def user_of(scope: Scope) -> UserInfo | None:
    """The authenticated user of a request (None: anonymous, or no token file configured)."""
    user = scope.get(USER_SCOPE_KEY)
    return user if isinstance(user, UserInfo) else None


__all__ = ["AuthMiddleware", "Unauthorized", "authenticate", "user_of"]
