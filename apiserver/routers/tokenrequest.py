"""TokenRequest: `POST /api/v1/namespaces/NS/serviceaccounts/NAME/token`, what `kubectl create token` and
kubelet's projected volumes call (pkg/registry/core/serviceaccount/storage/token.go).

An authentication.k8s.io/v1 TokenRequest in, the same back with `status.token` (a JWT signed by the API
server's service account key, satokens.py) and `status.expirationTimestamp`, 201. kube's defaults
(expirationSeconds 3600, audiences the API's own) and validation (at least 10 minutes, at most 2^32
seconds); a token may be bound to a Pod, a Secret or a Node of the account's namespace, named and, when
the reference carries a uid, that very object (else 409). A pod-bound token asked for 3607 s with the
API's audiences is issued for a year with `warnafter` at 3607 s (--service-account-extend-token-
expiration, kube's default), so a pod whose kubelet does not refresh its token keeps working.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from kubelab import kinds, timeutil
from kubelab.validation import FieldError, go_quote, invalid

from .. import codecs, errors, satokens
from ..registry import Registry

API_VERSION = "authentication.k8s.io/v1"
KIND = "TokenRequest"
QUALIFIED_KIND = "TokenRequest.authentication.k8s.io"
DEFAULT_EXPIRATION_SECONDS = 3600  # SetDefaults_TokenRequestSpec
MIN_EXPIRATION_SECONDS = 10 * 60
MAX_EXPIRATION_SECONDS = 1 << 32
BINDABLE = {"Pod": kinds.PODS, "Secret": kinds.SECRETS, "Node": kinds.NODES}


def _invalid(name: str, errs: list[FieldError]) -> errors.StatusError:
    """apierrors.NewInvalid(TokenRequest's GroupKind, name, errs)."""
    text = str(errs[0]) if len(errs) == 1 else "[" + ", ".join(str(e) for e in errs) + "]"
    return errors.StatusError(422, "Invalid", f"{QUALIFIED_KIND} {go_quote(name)} is invalid: {text}",
                              {"name": name, "group": "authentication.k8s.io", "kind": KIND,
                               "causes": [{"reason": e.reason, "message": e.body, "field": e.field} for e in errs]})


def _decode_error(message: str) -> errors.StatusError:
    return errors.bad_request(f"{KIND} in version \"v1\" cannot be handled as a {KIND}: {message}")


def parse(body: Any, *, namespace: str, name: str, audiences: tuple[str, ...]) -> dict[str, Any]:
    """The request with kube's defaults, or the Status kube's decoding and its name checks answer a bad one
    with (the duration is validated once the account is found: `validate`). Pure."""
    if not isinstance(body, dict):
        raise errors.bad_request(f"the object provided is unrecognized (must be of type {KIND})")
    kind, api_version = body.get("kind"), body.get("apiVersion")
    if (kind or KIND, api_version or API_VERSION) != (KIND, API_VERSION):
        raise errors.bad_request(f"the API version in the data ({api_version}) does not match the expected API "
                                 f"version ({API_VERSION})" if kind in (None, KIND) else
                                 f"{KIND} in version \"v1\" cannot be handled as a {KIND}: no kind \"{kind}\" is "
                                 f"registered for version \"{api_version}\"")
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    if not isinstance(meta, dict) or not isinstance(spec, dict):
        raise _decode_error("json: cannot unmarshal into an object")
    if meta.get("name") and meta["name"] != name:
        raise _invalid(name, [invalid("metadata.name", meta["name"], "must match the service account name if specified")])
    if meta.get("namespace") and meta["namespace"] != namespace:
        raise _invalid(name, [invalid("metadata.namespace", meta["namespace"],
                                      "must match the service account namespace if specified")])
    wanted = spec.get("audiences")
    if wanted is not None and (not isinstance(wanted, list) or not all(isinstance(a, str) for a in wanted)):
        raise _decode_error("json: cannot unmarshal into Go struct field TokenRequestSpec.spec.audiences of type "
                            "[]string")
    seconds = spec.get("expirationSeconds")
    if seconds is None:
        seconds = DEFAULT_EXPIRATION_SECONDS
    elif isinstance(seconds, bool) or not isinstance(seconds, int) or not -(2**63) <= seconds < 2**63:
        # encoding/json takes only an integer that fits an int64 (not 3600.0, "3600" or 1e300).
        raise _decode_error("json: cannot unmarshal into Go struct field TokenRequestSpec.spec.expirationSeconds"
                            " of type int64")
    ref = spec.get("boundObjectRef")
    if ref is not None and not isinstance(ref, dict):
        raise _decode_error("json: cannot unmarshal into Go struct field TokenRequestSpec.spec.boundObjectRef of "
                            "type authentication.BoundObjectReference")
    for key in ("kind", "apiVersion", "name", "uid"):
        if ref is not None and not isinstance(ref.get(key, ""), str):
            raise _decode_error(f"json: cannot unmarshal into Go struct field BoundObjectReference.spec.boundObjectRef."
                                f"{key} of type string")
    out_spec: dict[str, Any] = {"audiences": list(wanted) if wanted else list(audiences), "expirationSeconds": seconds}
    if ref is not None:
        out_spec["boundObjectRef"] = ref
    return {"kind": KIND, "apiVersion": API_VERSION,
            "metadata": {"name": name, "namespace": namespace}, "spec": out_spec}


def validate(req: dict[str, Any]) -> None:
    """ValidateTokenRequest, which kube runs once the service account is found."""
    seconds = req["spec"]["expirationSeconds"]
    errs: list[FieldError] = []
    if seconds < MIN_EXPIRATION_SECONDS:
        errs.append(invalid("spec.expirationSeconds", seconds, "may not specify a duration less than 10 minutes"))
    if seconds > MAX_EXPIRATION_SECONDS:
        errs.append(invalid("spec.expirationSeconds", seconds, "may not specify a duration larger than 2^32 seconds"))
    if errs:
        raise _invalid("", errs)


async def create_token(request: Request, namespace: str, name: str) -> Response:
    registry: Registry = request.app.state.registry
    signer: satokens.Signer = request.app.state.signer
    req = parse(codecs.decode(codecs.media_type(request), await codecs.read_body(request)), namespace=namespace,
                name=name, audiences=signer.audiences)
    account = await registry.get(kinds.SERVICEACCOUNTS, namespace, name)
    validate(req)
    now = int(time.time())
    req["metadata"]["creationTimestamp"] = timeutil.rfc3339(datetime.fromtimestamp(now, UTC))
    spec = req["spec"]
    pod = secret = node = None
    ref = spec.get("boundObjectRef")
    if ref is not None:
        kind, api_version = str(ref.get("kind") or ""), str(ref.get("apiVersion") or "")
        rt = BINDABLE.get(kind) if api_version == "v1" else None
        if rt is None:
            group, _, version = api_version.rpartition("/")
            raise errors.bad_request(f"cannot bind token to object of type {group}/{version}, Kind={kind}")
        bound_name = str(ref.get("name") or "")
        if not bound_name:  # the store's key function refuses an empty name
            raise errors.bad_request("Name parameter required.")
        obj = await registry.get(rt, namespace if rt.namespaced else None, bound_name)
        meta = obj.get("metadata") or {}
        bound = satokens.Ref(bound_name, str(meta.get("uid") or ""))
        if rt is kinds.PODS:
            if ((obj.get("spec") or {}).get("serviceAccountName") or "") != name:
                raise errors.bad_request(f"cannot bind token for serviceaccount {go_quote(name)} to pod running with "
                                         "different serviceaccount name.")
            pod = bound
            node_name = (obj.get("spec") or {}).get("nodeName")
            if node_name:  # ServiceAccountTokenPodNodeInfo: the pod's node, by uid when it exists
                try:
                    node_obj = await registry.get(kinds.NODES, None, node_name)
                    node = satokens.Ref(node_name, str((node_obj.get("metadata") or {}).get("uid") or ""))
                except errors.StatusError as exc:
                    if exc.code != 404:
                        raise
                    node = satokens.Ref(node_name, "")
        elif rt is kinds.SECRETS:
            secret = bound
        else:
            node = bound
        if ref.get("uid") and ref["uid"] != bound.uid:
            raise errors.StatusError(
                409, "Conflict", f"Operation cannot be fulfilled on {kind} {go_quote(bound_name)}: the UID in the "
                f"bound object reference ({ref['uid']}) does not match the UID in record. The object might have "
                "been deleted and then recreated", {"name": bound_name, "kind": kind})
    seconds, warn_after = spec["expirationSeconds"], 0
    if pod is not None and seconds == satokens.WARN_ONLY_EXPIRATION_SECONDS and signer.is_kube_audience(
            spec["audiences"]):
        seconds, warn_after = satokens.EXTENDED_EXPIRATION_SECONDS, spec["expirationSeconds"]
    sa_meta = account.get("metadata") or {}
    payload = satokens.claims(satokens.Ref(name, str(sa_meta.get("uid") or "")), namespace,
                              audiences=spec["audiences"], now=now, expiration=seconds, issuer=signer.issuer,
                              warn_after=warn_after, pod=pod, secret=secret, node=node)
    req["status"] = {"token": signer.sign(payload), "expirationTimestamp": timeutil.rfc3339(
        datetime.fromtimestamp(now + spec["expirationSeconds"], UTC))}
    return codecs.respond(request, req, status_code=201)


__all__ = ["create_token", "parse", "validate"]
