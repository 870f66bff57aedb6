"""Authentication and authorization, as one ASGI middleware in front of every route (app.py adds it when
the API server is given a token file).

Authentication is kube-apiserver's static token file with bearer tokens
(`Authorization: Bearer <token>`, bearertoken.Authenticator): a header without a bearer token leaves
the request anonymous, a bearer token that is not in the file is a 401. Anonymous requests reach only
the public paths (/healthz, /livez, /readyz, /version: system:public-info-viewer); anything else is
a 401, as kube-apiserver answers when anonymous access is limited to those endpoints
(AnonymousAuthConfigurableEndpoints). Authorization and admission of node users are `authz.py`'s;
this module gathers what they need: the body of a create, the stored pod a node deletes or reports on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.datastructures import Headers, QueryParams
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kubelab import kinds
from kubelab.tokenfile import UserInfo

from . import codecs, errors
from .authz import PUBLIC_PATHS, RequestInfo, admit_node_write, authorize_node, node_name, request_info

AUTHENTICATED_GROUP = "system:authenticated"
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
    """Authenticate, then let node users through only where the Node authorizer and NodeRestriction
    would. `state` is the app's state, whose `registry` answers the lookups admission needs."""

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
        if user is None:
            if scope["method"] == "GET" and scope["path"] in PUBLIC_PATHS:
                await self.app(scope, receive, send)
            else:
                await self._refuse(unauthorized(), scope, receive, send)
            return
        scope[USER_SCOPE_KEY] = user
        node = node_name(user)
        if node is None:  # every other authenticated user is a cluster-admin
            await self.app(scope, receive, send)
            return
        info = request_info(scope["method"], scope["path"], QueryParams(scope.get("query_string", b"")))
        refusal = authorize_node(user, node, info)
        if refusal is None and info.is_resource and info.verb not in ("get", "list", "watch"):
            try:
                refusal, receive = await self._admit(node, info, headers, receive)
            except errors.StatusError as exc:
                refusal = exc
        if refusal is not None:
            await self._refuse(refusal, scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def _admit(self, node: str, info: RequestInfo, headers: Headers, receive: Receive
                     ) -> tuple[errors.StatusError | None, Receive]:
        """NodeRestriction, with what it needs read first. Returns the verdict and the receive channel
        to hand on (a replay of the body, when the body had to be read)."""
        body: Any = None
        stored: dict[str, Any] | None = None
        node_uid: str | None = None
        core = info.group == ""
        if info.verb == "create" and (core and info.resource in ("pods", "nodes") and not info.subresource
                                      or (info.group, info.resource) == ("coordination.k8s.io", "leases")):
            raw, receive = await _buffer_body(headers, receive)
            body = codecs.decode((headers.get("content-type") or "application/json").split(";")[0].strip().lower(),
                                 raw)
            if core and info.resource == "pods":
                node_uid = ((await self._lookup(kinds.NODES, None, node)) or {}).get("metadata", {}).get("uid")
        elif core and info.resource == "pods" and info.name and (info.verb == "delete" or info.subresource == "status"):
            stored = await self._lookup(kinds.PODS, info.namespace, info.name)
        return admit_node_write(node, info, body=body, stored=stored, node_uid=node_uid), receive

    async def _lookup(self, rt: kinds.ResourceType, namespace: str | None, name: str) -> dict[str, Any] | None:
        try:
            obj: dict[str, Any] = await self.state.registry.get(rt, namespace, name)
        except errors.StatusError as exc:
            if exc.code == 404:
                return None  # the request goes on, and the registry answers it with the same 404
            raise
        return obj

    @staticmethod
    async def _refuse(exc: errors.StatusError, scope: Scope, receive: Receive, send: Send) -> None:
        response = codecs.status_response(exc)
        await response(scope, receive, send)


async def _buffer_body(headers: Headers, receive: Receive) -> tuple[bytes, Receive]:
    """Read the whole body (3 MiB at most, as the routers allow) and a receive that replays it."""
    length = headers.get("content-length")
    if length and length.isdigit() and int(length) > codecs.MAX_BODY:
        raise errors.too_large()
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise errors.bad_request("the client went away before sending its body")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > codecs.MAX_BODY:
            raise errors.too_large()
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    raw = b"".join(chunks)
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": raw, "more_body": False}
        return await receive()

    return raw, replay


def user_of(scope: Scope) -> UserInfo | None:
    """The authenticated user of a request (None: anonymous, or no token file configured)."""
    user = scope.get(USER_SCOPE_KEY)
    return user if isinstance(user, UserInfo) else None


__all__ = ["AuthMiddleware", "Unauthorized", "authenticate", "user_of"]
