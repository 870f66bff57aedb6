"""Authentication and authorization, as one ASGI middleware in front of every route (app.py adds it).

Authentication is kube-apiserver's static token file with bearer tokens
(`Authorization: Bearer <token>`, bearertoken.Authenticator) and its service account token
authenticator: a bearer token that is a JWT of this API server's issuer is checked as kube checks it
(signature, exp/nbf, an audience of the API's, the service account still there with the same uid, the
pod, secret or node it is bound to still there with the same uid and not being deleted) and names the
user `system:serviceaccount:NS:NAME` in system:serviceaccounts and system:serviceaccounts:NS, with
the bound pod's name and uid and the token's credential id as extras. A header without a bearer token
leaves the request anonymous; a bearer token that is neither in the file nor a valid service account
token is kube's 401.

Without a token file the API is open, as kube-apiserver with AlwaysAllow and anonymous access:
requests without a token go through; a service account token is still checked, and an invalid one
(expired, another audience, its pod deleted) is a 401, as kube answers; a valid one goes through. Anonymous requests reach only
the public paths (/healthz, /livez, /readyz, /version: system:public-info-viewer); anything else is
a 401, as kube-apiserver answers when anonymous access is limited to those endpoints
(AnonymousAuthConfigurableEndpoints). Impersonation headers are honoured for users allowed to
impersonate and refused with kube's 403 for the others (impersonation.py). Authorization and admission
are `authz.py`'s, on the request's one RequestInfo (requestinfo.py), the record the router dispatches on;
admission of node writes runs after routing (admission.py), as kube's admission runs in the handler.
"""

from __future__ import annotations

import base64
import hmac
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from kubelab import kinds, timeutil
from kubelab.tokenfile import UserInfo

from . import admission, codecs, errors, impersonation, rbacguard, requestctx, requestinfo, satokens
from .admission import NodeAdmission
from .authz import (
    DEFAULT_MODES,
    PUBLIC_PATHS,
    authorize,
    authorizer_denial,
    node_name,
    upgrade_create_check,
    verdict,
)
from .rbac import Policy
from .tokengetters import TokenObjectGetter

AUTHENTICATED_GROUP = impersonation.AUTHENTICATED_GROUP
# Who an anonymous request on a public path is, as kube's anonymous authenticator names it.
ANONYMOUS = UserInfo(impersonation.ANONYMOUS_USER, "", (impersonation.UNAUTHENTICATED_GROUP,))
USER_SCOPE_KEY = "kubelab.user"  # the authenticated UserInfo, in the ASGI scope, for the layers below
# On an open API server: the service account a valid token named, for SelfSubjectReview only (nothing is
# authorized by it there).
IDENTITY_SCOPE_KEY = "kubelab.identity"


class Unauthorized(Exception):
    """A bearer token was given and it is not a valid one."""


def bearer_token(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, None for any other header."""
    parts = (header or "").strip().split(" ")
    if len(parts) < 2 or parts[0].lower() != "bearer" or not parts[1]:
        return None
    return parts[1]


def authenticate(header: str | None, tokens: Mapping[str, UserInfo]) -> UserInfo | None:
    """The user of the token file a request's Authorization header names, None when it names none
    (anonymous). A token not in the file is Unauthorized (the middleware first tries it as a service
    account token)."""
    token = bearer_token(header)
    if token is None:
        return None
    user = tokens.get(token)
    if user is None:
        raise Unauthorized("invalid bearer token")
    return with_authenticated(user)


def with_authenticated(user: UserInfo) -> UserInfo:
    if AUTHENTICATED_GROUP in user.groups:
        return user
    return UserInfo(user.name, user.uid, (*user.groups, AUTHENTICATED_GROUP), user.extra)


async def authenticate_service_account(token: str, signer: satokens.Signer, getter: TokenObjectGetter) -> UserInfo:
    """The service account user a JWT names, or Unauthorized (see `check_service_account_token`)."""
    return service_account_user(await check_service_account_token(token, signer, getter))


def service_account_user(info: satokens.ServiceAccountInfo) -> UserInfo:
    """ServiceAccountInfo.UserInfo: system:serviceaccount:NS:NAME in its groups, with its extras."""
    return UserInfo(satokens.username(info.namespace, info.name), info.uid,
                    (*satokens.groups(info.namespace), AUTHENTICATED_GROUP), info.extra())


async def check_service_account_token(token: str, signer: satokens.Signer, getter: TokenObjectGetter, *,
                                      audiences: tuple[str, ...] | None = None) -> satokens.ServiceAccountInfo:
    """What a JWT of ours says of its holder, or Unauthorized in kube's words: its signature, times and
    audience (satokens.Signer.verify; `audiences` those asked for, the API's by default), then kube's
    validator (pkg/serviceaccount/claims.go) on what it names, read from storage as kube's getters read
    it: the service account, with the claim's uid and not deleted; the secret, pod or node the token is
    bound to, each there, with the claim's uid and not deleted for more than a minute (a pod terminating
    gracefully keeps its token; a node-bound token whose node had no uid when issued is only checked to
    exist, and a pod's node is informational: ServiceAccountTokenPodNodeInfo)."""
    if signer.is_legacy(token):
        return await check_legacy_token(token, signer, getter, audiences=audiences)
    try:
        info = signer.verify(token, audiences=audiences)
    except satokens.InvalidToken as exc:
        raise Unauthorized(str(exc)) from None
    namespace = info.namespace
    account = await _read(getter, kinds.SERVICEACCOUNTS, namespace, info.name)
    if account is None:
        raise Unauthorized(INVALIDATED)
    meta = account.get("metadata") or {}
    if meta.get("uid") != info.uid:
        raise Unauthorized(f"service account UID ({meta.get('uid', '')}) does not match claim ({info.uid})")
    if _deleted_long_ago(meta):
        raise Unauthorized(f"service account {namespace}/{info.name} has been deleted")
    bound: list[tuple[kinds.ResourceType, str | None, satokens.Ref, str]] = []
    if info.secret is not None:
        bound.append((kinds.SECRETS, namespace, info.secret, "secret"))
    if info.pod is not None:
        bound.append((kinds.PODS, namespace, info.pod, "pod"))
    if info.node is not None and info.pod is None:
        bound.append((kinds.NODES, None, info.node, "node"))
    for rt, ns, ref, word in bound:
        obj = await _read(getter, rt, ns, ref.name)
        if obj is None:
            raise Unauthorized(INVALIDATED)
        obj_meta = obj.get("metadata") or {}
        if ref.uid and obj_meta.get("uid") != ref.uid:
            raise Unauthorized(f"{word} UID ({obj_meta.get('uid', '')}) does not match service account {word} ref "
                               f"claim ({ref.uid})")
        if _deleted_long_ago(obj_meta):
            raise Unauthorized(INVALIDATED)
    return info


async def check_legacy_token(token: str, signer: satokens.Signer, getter: TokenObjectGetter, *,
                             audiences: tuple[str, ...] | None = None) -> satokens.ServiceAccountInfo:
    """A legacy token of a `kubernetes.io/service-account-token` Secret (the token controller signs them),
    checked as kube's legacy validator checks it (pkg/serviceaccount/legacy.go), in its words: our
    signature; audience-agnostic (valid for the API's audiences only); the Secret it names still there,
    not being deleted, and still holding this very token; the account there, not being deleted, with the
    claim's uid."""
    try:
        claimed = signer.verify_legacy(token)
    except satokens.InvalidToken as exc:
        raise Unauthorized(str(exc)) from None
    wanted = audiences or signer.audiences
    matched = tuple(a for a in signer.audiences if a in wanted)
    if not matched:
        raise Unauthorized(f"token audiences {satokens.go_strings(signer.audiences)} is invalid for the target "
                           f"audiences {satokens.go_strings(wanted)}")
    secret = await _read(getter, kinds.SECRETS, claimed.namespace, claimed.secret)
    if secret is None or (secret.get("metadata") or {}).get("deletionTimestamp"):
        raise Unauthorized("Token has been invalidated")
    stored = (secret.get("data") or {}).get("token")
    try:
        held = base64.b64decode(stored, validate=True) if isinstance(stored, str) else b""
    except ValueError:
        held = b""
    if not hmac.compare_digest(held, token.encode()):
        raise Unauthorized("Token does not match server's copy")
    account = await _read(getter, kinds.SERVICEACCOUNTS, claimed.namespace, claimed.name)
    if account is None:
        raise Unauthorized(f'serviceaccounts "{claimed.name}" not found')
    meta = account.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        raise Unauthorized(f"ServiceAccount {claimed.namespace}/{claimed.name} has been deleted")
    if meta.get("uid") != claimed.uid:
        raise Unauthorized(f"ServiceAccount UID ({meta.get('uid', '')}) does not match claim ({claimed.uid})")
    return satokens.ServiceAccountInfo(claimed.namespace, claimed.name, claimed.uid, audiences=matched)


INVALIDATED = "service account token has been invalidated"
# claims.go's invalidIfDeletedBefore: an object whose deletion began less than this long ago (or is still to
# come, as a pod's graceful termination has it) keeps its tokens valid.
DELETION_LEEWAY_SECONDS = 60


def _deleted_long_ago(meta: dict[str, Any]) -> bool:
    stamp = meta.get("deletionTimestamp")
    if not stamp:
        return False
    when = timeutil.parse(str(stamp))
    return when is None or when.timestamp() < time.time() - DELETION_LEEWAY_SECONDS


async def _read(getter: TokenObjectGetter, rt: kinds.ResourceType, namespace: str | None, name: str
                ) -> dict[str, Any] | None:
    """The object as kube's validator's getters read it (the watch cache first: tokengetters.py); None when
    it is not there."""
    return await getter.get(rt, namespace, name)


def token_getter(state: Any) -> TokenObjectGetter:
    """The app's getter for token checks (made with its registry once storage is connected, app.py)."""
    getter = getattr(state, "token_getter", None)
    if not isinstance(getter, TokenObjectGetter):
        getter = state.token_getter = TokenObjectGetter(state.registry)
    return getter


INVALID_BEARER_TOKEN = "invalid bearer token"  # bearertoken.Authenticator's word when no authenticator claims it


@dataclass(frozen=True)
class TokenVerdict:
    """What the authenticators say of a token (a TokenReview's status): the user, the audiences it was
    found valid for, or the error."""

    user: UserInfo | None
    audiences: tuple[str, ...] = ()
    error: str = ""


async def review_token(token: str, audiences: tuple[str, ...], *, tokens: Mapping[str, UserInfo] | None,
                       signer: satokens.Signer, getter: TokenObjectGetter) -> TokenVerdict:
    """The request authenticator run on a bearer token alone, as TokenReview runs it: the token file (whose
    tokens are audience-agnostic: valid for the API's audiences only, WrapAudienceAgnosticToken), then the
    service account authenticator for JWTs of our issuer. `audiences` empty: the API's. A token nobody
    claims is kube's "invalid bearer token"; one of ours that fails is kube's aggregate of both errors."""
    wanted = audiences or signer.audiences
    user = tokens.get(token) if tokens is not None else None
    if user is not None:
        matched = tuple(a for a in signer.audiences if a in wanted)
        if matched:
            return TokenVerdict(with_authenticated(user), matched)
    if not signer.looks_like_ours(token):
        return TokenVerdict(None, error=INVALID_BEARER_TOKEN)
    try:
        info = await check_service_account_token(token, signer, getter, audiences=wanted)
    except Unauthorized as exc:
        return TokenVerdict(None, error=f"[{INVALID_BEARER_TOKEN}, {exc}]")
    return TokenVerdict(service_account_user(info), info.audiences)


def unauthorized() -> errors.StatusError:
    return errors.StatusError(401, "Unauthorized", "Unauthorized")


class AuthMiddleware:
    """Authenticate, impersonate when asked and allowed, then authorize on the request's one RequestInfo;
    a node's request carries its NodeRestriction admission on to the router (admission.py). `state` is
    the app's state, whose `registry` answers the lookups admission needs and whose `signer` checks
    service account tokens. `tokens` None: the API is open (see the module docstring)."""

    def __init__(self, app: ASGIApp, *, tokens: Mapping[str, UserInfo] | None, state: Any) -> None:
        self.app = app
        self.tokens = tokens
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket" and requestinfo.SCOPE_KEY not in scope:
            # A WebSocket upgrade (exec, attach, port-forward, watch) is a GET, and authenticated and
            # authorized as one before the upgrade, as kube-apiserver's filters see it; a refusal is the
            # same Status, sent as the handshake's HTTP answer (ASGI's websocket.http.response).
            scope[requestinfo.SCOPE_KEY] = requestinfo.parse("GET", scope["path"], scope.get("query_string", b""))
        if self.tokens is None:
            await self._open(scope, receive, send)
            return
        headers = Headers(scope=scope)
        try:
            user = await self._authenticate(headers.get("authorization"), self.tokens)
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
            modes, policy = await authorizer_inputs(self.state)
            user = self._impersonate(user, headers, scope, policy=policy, modes=modes)
            scope[USER_SCOPE_KEY] = user
            requestctx.user.set(user)
            refusal = authorize(user, info, policy=policy, modes=modes)
            also = upgrade_create_check(info, websocket=headers.get("upgrade", "").lower() == "websocket")
            if refusal is None and also is not None:
                refusal = authorize(user, also, policy=policy, modes=modes)
            node = node_name(user)
            if node is not None:  # NodeRestriction runs once the router has found the resource
                scope[admission.SCOPE_KEY] = NodeAdmission(node, self.state.registry)
        except errors.StatusError as exc:
            refusal = exc
        if refusal is not None:
            await self._refuse(refusal, scope, receive, send)
            return
        # Escalation prevention judges RBAC writes by who asks (rbacguard.py).
        asker = rbacguard.ASKER.set(rbacguard.Asker(user, policy, modes)) if info.group == kinds.RBAC_GROUP else None
        try:
            await self.app(scope, receive, send)
        finally:
            if asker is not None:
                rbacguard.ASKER.reset(asker)

    async def _authenticate(self, header: str | None, tokens: Mapping[str, UserInfo]) -> UserInfo | None:
        """The union of kube's authenticators: the token file first, then service account tokens."""
        try:
            return authenticate(header, tokens)
        except Unauthorized:
            token = bearer_token(header)
            signer = getattr(self.state, "signer", None)
            if token is None or signer is None or not signer.looks_like_ours(token):
                raise
            return await authenticate_service_account(token, signer, token_getter(self.state))

    async def _open(self, scope: Scope, receive: Receive, send: Send) -> None:
        """No token file: everything goes through, but a service account token must be a valid one."""
        token = None
        for key, value in scope["headers"]:
            if key == b"authorization":
                token = bearer_token(value.decode("latin-1"))
                break
        signer = getattr(self.state, "signer", None)
        if token is not None and signer is not None and signer.looks_like_ours(token):
            try:
                scope[IDENTITY_SCOPE_KEY] = await authenticate_service_account(token, signer,
                                                                                token_getter(self.state))
            except Unauthorized:
                await self._refuse(unauthorized(), scope, receive, send)
                return
        await self.app(scope, receive, send)

    @staticmethod
    def _impersonate(user: UserInfo, headers: Headers, scope: Scope, *, policy: Policy | None,
                     modes: tuple[str, ...]) -> UserInfo:
        """WithImpersonation: the user the request goes on as. Every thing asked for is authorized on its
        own, as the `impersonate` verb (the 403 names the first refused); the headers are then removed for
        the layers below."""
        asked = impersonation.requested(headers)
        if not asked:
            return user
        for request in asked:
            attributes = request.attributes(scope["path"])
            allowed, reason = verdict(user, attributes, policy=policy, modes=modes)
            if not allowed:
                raise authorizer_denial(user, attributes, reason)
        scope["headers"] = [(k, v) for k, v in scope["headers"] if not impersonation.is_header(k.decode("latin-1"))]
        return impersonation.acting_as(asked, groups_specified=bool(headers.getlist(impersonation.GROUP_HEADER)))

    @staticmethod
    async def _refuse(exc: errors.StatusError, scope: Scope, receive: Receive, send: Send) -> None:
        response = codecs.status_response(exc)
        await response(scope, receive, send)


async def authorizer_inputs(state: Any) -> tuple[tuple[str, ...], Policy | None]:
    """The API server's --authorization-mode and, when RBAC is among them, its current policy (None before
    storage is connected: RBAC then allows nothing, and system:masters still everything)."""
    modes: tuple[str, ...] = getattr(state, "authorization_modes", DEFAULT_MODES)
    source = getattr(state, "policy_source", None)
    if "RBAC" not in modes or source is None:
        return modes, None
    return modes, await source.policy()


def identity_of(scope: Scope) -> UserInfo | None:
    """On an open API server, the service account a request's valid token names (else None)."""
    user = scope.get(IDENTITY_SCOPE_KEY)
    return user if isinstance(user, UserInfo) else None


def user_of(scope: Scope) -> UserInfo | None:
    """The authenticated user of a request (None: anonymous, or no token file configured)."""
    user = scope.get(USER_SCOPE_KEY)
    return user if isinstance(user, UserInfo) else None


__all__ = ["AuthMiddleware", "TokenVerdict", "Unauthorized", "authenticate", "authorizer_inputs", "identity_of", "review_token",
           "token_getter", "user_of"]
