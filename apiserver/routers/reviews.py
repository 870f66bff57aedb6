"""SelfSubjectAccessReview, SubjectAccessReview, LocalSubjectAccessReview, SelfSubjectRulesReview, SelfSubjectReview
and TokenReview. `kubectl auth can-i VERB RESOURCE` asks the API server whether the asking user
may do something, and the server answers with the same authorizers that judge real requests (authz.py).
Nothing is stored; the answer comes back in `status` with 201, as kube-apiserver's REST handler gives it.

kubelab's authorizers (see authz.py): without a token file the API is open, so everything is allowed (as
kube-apiserver with AlwaysAllow); with one, the --authorization-mode chain (Node,RBAC by default) answers.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from kubelab import kinds
from kubelab.models import SelfSubjectAccessReview, SelfSubjectRulesReview, SubjectAccessReview
from kubelab.tokenfile import MASTERS_GROUP, UserInfo
from kubelab.validation import FieldError, invalid

from .. import codecs, errors, rbac
from ..auth import ANONYMOUS, authorizer_inputs, identity_of, review_token, token_getter, user_of
from ..authz import node_name, verdict
from ..rbacguard import FULL_AUTHORITY
from ..registry import decoding
from ..requestinfo import RequestInfo

RT = kinds.SELFSUBJECTACCESSREVIEWS


async def create_self_subject_access_review(request: Request) -> Response:
    body = codecs.decode(codecs.media_type(request), await codecs.read_body(request))
    # Decoded as any other kind's body is: kube's words for a non-object, another kind, a wrong type.
    review: SelfSubjectAccessReview = decoding.to_model(RT, decoding.check_kind(RT, body))
    spec = review.spec
    resource = spec.resource_attributes if spec else None
    non_resource = spec.non_resource_attributes if spec else None
    problems: list[FieldError] = []
    if resource is not None and non_resource is not None:  # ValidateSelfSubjectAccessReviewSpec
        problems.append(invalid("spec.nonResourceAttributes", non_resource.to_dict(),
                                "cannot be specified in combination with resourceAttributes"))
    if resource is None and non_resource is None:
        problems.append(invalid("spec.resourceAttributes", None,
                                "exactly one of nonResourceAttributes or resourceAttributes must be specified"))
    if problems:
        raise errors.invalid(RT, "", problems)

    allowed, reason = True, ""
    user = user_of(request.scope)  # None: the API is open (no token file), and everything is allowed
    if user is not None:
        if resource is not None:
            info = RequestInfo(path="", verb=resource.verb or "", is_resource=True, group=resource.group or "",
                               version=resource.version or "", resource=resource.resource or "",
                               subresource=resource.subresource or "", namespace=resource.namespace or "",
                               name=resource.name or "")
        else:
            assert non_resource is not None
            info = RequestInfo(path=non_resource.path or "", verb=non_resource.verb or "")
        modes, policy = await authorizer_inputs(request.app.state)
        allowed, reason = verdict(user, info, policy=policy, modes=modes)
    out: dict[str, Any] = {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
                           "metadata": {"creationTimestamp": None},
                           "spec": body.get("spec") or {}, "status": {"allowed": allowed}}
    if reason:
        out["status"]["reason"] = reason
    return codecs.respond(request, out, status_code=201)


def _attributes(resource: Any, non_resource: Any) -> RequestInfo:
    """The authorization attributes a review's spec asks about."""
    if resource is not None:
        return RequestInfo(path="", verb=resource.verb or "", is_resource=True, group=resource.group or "",
                           version=resource.version or "", resource=resource.resource or "",
                           subresource=resource.subresource or "", namespace=resource.namespace or "",
                           name=resource.name or "")
    return RequestInfo(path=non_resource.path or "", verb=non_resource.verb or "")


async def create_subject_access_review(request: Request, rt: kinds.ResourceType, namespace: str | None) -> Response:
    """SubjectAccessReview and LocalSubjectAccessReview (pkg/registry/authorization/*subjectaccessreview): the
    authorizers' verdict for the user, groups, uid and extra the spec names (as given: no group is added),
    201, nothing stored. A local one asks about its own namespace only."""
    body = codecs.decode(codecs.media_type(request), await codecs.read_body(request))
    review: SubjectAccessReview = decoding.to_model(rt, decoding.check_kind(rt, body))
    spec = review.spec
    resource = spec.resource_attributes if spec else None
    non_resource = spec.non_resource_attributes if spec else None
    problems: list[FieldError] = []
    if resource is not None and non_resource is not None:  # ValidateSubjectAccessReviewSpec
        problems.append(invalid("spec.nonResourceAttributes", non_resource.to_dict(),
                                "cannot be specified in combination with resourceAttributes"))
    if resource is None and non_resource is None:
        problems.append(invalid("spec.resourceAttributes", None,
                                "exactly one of nonResourceAttributes or resourceAttributes must be specified"))
    if not (spec and (spec.user or spec.groups)):
        problems.append(invalid("spec.user", (spec.user if spec else None) or "",
                                "at least one of user or group must be specified"))
    if rt == kinds.LOCALSUBJECTACCESSREVIEWS and non_resource is not None:  # ValidateLocalSubjectAccessReview
        problems = [p for p in problems if p.field != "spec.nonResourceAttributes"]
        problems.append(invalid("spec.nonResourceAttributes", non_resource.to_dict(),
                                "disallowed on this kind of request"))
    if problems:
        raise errors.invalid(rt, review.metadata.name or "", problems)
    if rt == kinds.LOCALSUBJECTACCESSREVIEWS and resource is not None and (resource.namespace or "") != namespace:
        raise errors.bad_request(f"spec.resourceAttributes.namespace must match namespace: {namespace}")
    assert spec is not None
    user = UserInfo(spec.user or "", spec.uid or "", tuple(spec.groups or ()),
                    tuple((k, tuple(v)) for k, v in (spec.extra or {}).items()))
    allowed, reason = True, ""
    if user_of(request.scope) is not None:  # an open API server allows everything (AlwaysAllow)
        modes, policy = await authorizer_inputs(request.app.state)
        allowed, reason = verdict(user, _attributes(resource, non_resource), policy=policy, modes=modes)
    meta: dict[str, Any] = {"creationTimestamp": None}
    if namespace:
        meta = {"namespace": namespace, **meta}
    out: dict[str, Any] = {"kind": rt.kind, "apiVersion": "authorization.k8s.io/v1", "metadata": meta,
                           "spec": body.get("spec") or {}, "status": {"allowed": allowed}}
    if reason:
        out["status"]["reason"] = reason
    return codecs.respond(request, out, status_code=201)


async def create_self_subject_rules_review(request: Request) -> Response:
    """SelfSubjectRulesReview (`kubectl auth can-i --list`): every rule the asking user has in
    `spec.namespace`, split into resource and non-resource rules, 201. system:masters has `*` on
    everything first; a node's rules are not enumerable (`incomplete`, with the Node authorizer's words); a
    binding to a missing role is an evaluation error. On an open API server (AlwaysAllow) everything is
    allowed, and AlwaysAllow says so with `*` rules."""
    body = codecs.decode(codecs.media_type(request), await codecs.read_body(request))
    review: SelfSubjectRulesReview = decoding.to_model(RULES, decoding.check_kind(RULES, body))
    namespace = (review.spec.namespace if review.spec else None) or ""
    user = user_of(request.scope)
    rules: list[Any] = []
    errs: list[str] = []
    incomplete = False
    modes, policy = await authorizer_inputs(request.app.state)
    if user is None or "AlwaysAllow" in modes or MASTERS_GROUP in user.groups:
        rules += list(FULL_AUTHORITY)
    if user is not None:
        for mode in modes:
            if mode == "Node" and node_name(user) is not None:
                incomplete = True
                errs.append("node authorizer does not support user rule resolution")
            elif mode == "RBAC":
                found, problems = rbac.rules_for(policy or rbac.Policy(), user, namespace)
                rules += found
                errs += problems
    resource_rules = [{k: r[k] for k in ("verbs", "apiGroups", "resources", "resourceNames") if r.get(k)}
                      for r in rules if not r.get("nonResourceURLs")]
    for rule in resource_rules:
        rule.setdefault("verbs", [])
    non_resource_rules = [{"verbs": r.get("verbs") or [], "nonResourceURLs": r["nonResourceURLs"]}
                          for r in rules if r.get("nonResourceURLs")]
    status: dict[str, Any] = {"resourceRules": resource_rules, "nonResourceRules": non_resource_rules,
                              "incomplete": incomplete}
    if errs:
        status["evaluationError"] = rbac.aggregate(errs)  # union's aggregate of the authorizers' aggregates
    out = {"kind": "SelfSubjectRulesReview", "apiVersion": "authorization.k8s.io/v1",
           "metadata": {"creationTimestamp": None}, "spec": body.get("spec") or {}, "status": status}
    return codecs.respond(request, out, status_code=201)


RULES = kinds.SELFSUBJECTRULESREVIEWS


WHOAMI = kinds.SELFSUBJECTREVIEWS


async def create_self_subject_review(request: Request) -> Response:
    """SelfSubjectReview (`kubectl auth whoami`): the user the request was authenticated as, with its
    uid, groups and extras (a service account's bound pod and credential id among them), 201. On an open
    API server (no token file) a request is system:anonymous unless it carries a service account token,
    which names its account (auth.py keeps who that is for this answer alone)."""
    body = codecs.decode(codecs.media_type(request), await codecs.read_body(request))
    decoding.check_kind(WHOAMI, body)
    user = user_of(request.scope) or identity_of(request.scope) or ANONYMOUS
    info: dict[str, Any] = {"username": user.name}
    if user.uid:
        info["uid"] = user.uid
    if user.groups:
        info["groups"] = list(user.groups)
    if user.extra:
        info["extra"] = {key: list(values) for key, values in user.extra}
    out = {"kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1",
           "metadata": {"creationTimestamp": None}, "status": {"userInfo": info}}
    return codecs.respond(request, out, status_code=201)


TOKENREVIEWS = kinds.TOKENREVIEWS


def _token_review_decode_error(field: str, go_type: str) -> errors.StatusError:
    return errors.bad_request(f'TokenReview in version "v1" cannot be handled as a TokenReview: json: cannot unmarshal '
                              f"into Go struct field TokenReviewSpec.spec.{field} of type {go_type}")


def _user_info(user: Any) -> dict[str, Any]:
    """authentication.UserInfo as JSON: username, then uid, groups and extra when set (omitempty)."""
    info: dict[str, Any] = {"username": user.name}
    if user.uid:
        info["uid"] = user.uid
    if user.groups:
        info["groups"] = list(user.groups)
    if user.extra:
        info["extra"] = {key: list(values) for key, values in user.extra}
    return info


async def create_token_review(request: Request) -> Response:
    """TokenReview (pkg/registry/authentication/tokenreview/storage.go): the token of `spec.token` run
    through the API server's own authenticators (auth.review_token) for `spec.audiences` (the API's when
    none), and the answer in `status`, 201, nothing stored: `authenticated` and `user` (with its groups,
    system:authenticated among them, and extras), the `audiences` it is valid for, or the `error` why not.
    An empty token is kube's 400."""
    body = codecs.decode(codecs.media_type(request), await codecs.read_body(request))
    decoding.check_kind(TOKENREVIEWS, body)
    spec = body.get("spec") if isinstance(body, dict) else None
    if spec is not None and not isinstance(spec, dict):
        raise errors.bad_request('TokenReview in version "v1" cannot be handled as a TokenReview: json: cannot '
                                 "unmarshal into Go struct field TokenReview.spec of type v1.TokenReviewSpec")
    spec = spec or {}
    token = spec.get("token")
    if token is not None and not isinstance(token, str):
        raise _token_review_decode_error("token", "string")
    audiences = spec.get("audiences")
    if audiences is not None and (not isinstance(audiences, list) or not all(isinstance(a, str) for a in audiences)):
        raise _token_review_decode_error("audiences", "[]string")
    if not token:
        raise errors.bad_request("token is required for TokenReview in authentication")
    state = request.app.state
    verdict = await review_token(token, tuple(audiences or ()), tokens=getattr(state, "tokens", None),
                                 signer=state.signer, getter=token_getter(state))
    status: dict[str, Any] = {}
    if verdict.user is not None:
        status["authenticated"] = True
        status["user"] = _user_info(verdict.user)
        if verdict.audiences:
            status["audiences"] = list(verdict.audiences)
    else:
        status["user"] = {}
        status["error"] = verdict.error
    out_spec: dict[str, Any] = {"token": token}
    if audiences:
        out_spec["audiences"] = list(audiences)
    out = {"kind": "TokenReview", "apiVersion": "authentication.k8s.io/v1", "metadata": {"creationTimestamp": None},
           "spec": out_spec, "status": status}
    return codecs.respond(request, out, status_code=201)
