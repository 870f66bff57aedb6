"""Service account tokens: the signed JWTs the TokenRequest API issues and the authenticator accepts.

kube-apiserver signs them with --service-account-signing-key-file and checks them with the public half
(pkg/serviceaccount/jwt.go, claims.go). kubelab signs with ES256 (kube accepts RS256 and ES256 keys)
and keeps the key where it was made once (`kubelab up`: `<data-dir>/pki/sa.key`, kubeadm's sa.key), so
tokens outlive a restart of the API server, as they do in kube. Claims are kube's: iss, sub
(`system:serviceaccount:NS:NAME`), aud, exp, nbf, iat, jti, and the private `kubernetes.io` claim that
names the namespace, the service account and what the token is bound to (pod, secret or node, each by
name and uid), plus `warnafter` for the extended pod tokens kubelet mounts.

Checking a token's signature, times and audience is pure and lives here (`verify`); checking that what
it names still exists is the authenticator's (auth.py), which has the registry.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec

from kubelab import satokenkey

log = logging.getLogger(__name__)

ISSUER = "https://kubernetes.default.svc.cluster.local"  # kubeadm's --service-account-issuer
ALGORITHM = satokenkey.ALGORITHM
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
SERVICE_ACCOUNTS_GROUP = "system:serviceaccounts"
# pkg/serviceaccount: what kubelet asks for a projected token, and what the API server then really issues.
WARN_ONLY_EXPIRATION_SECONDS = 60 * 60 + 7
EXTENDED_EXPIRATION_SECONDS = 24 * 365 * 60 * 60
LEEWAY_SECONDS = 60  # go-jose's jwt.DefaultLeeway, which kube's validator uses for exp, nbf and iat
# user.Info extras of a service account user (k8s.io/apiserver/pkg/authentication/serviceaccount).
POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"
POD_UID_EXTRA = "authentication.kubernetes.io/pod-uid"
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
NODE_UID_EXTRA = "authentication.kubernetes.io/node-uid"
CREDENTIAL_ID_EXTRA = "authentication.kubernetes.io/credential-id"


class InvalidToken(Exception):
    """Not a token this API server issued, or no longer a valid one."""


def username(namespace: str, name: str) -> str:
    """serviceaccount.MakeUsername."""
    return f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"


def groups(namespace: str) -> tuple[str, ...]:
    """serviceaccount.MakeGroupNames."""
    return (SERVICE_ACCOUNTS_GROUP, f"{SERVICE_ACCOUNTS_GROUP}:{namespace}")


@dataclass(frozen=True)
class Ref:
    name: str
    uid: str


@dataclass(frozen=True)
class ServiceAccountInfo:
    """What a valid token says about who holds it (serviceaccount.ServiceAccountInfo)."""

    namespace: str
    name: str
    uid: str
    pod: Ref | None = None
    secret: Ref | None = None
    node: Ref | None = None
    credential_id: str = ""
    audiences: tuple[str, ...] = ()  # those of the token that were asked for (a TokenReview's status.audiences)

    def extra(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """The user's extras, as kube's ServiceAccountInfo.UserInfo fills them."""
        out: list[tuple[str, tuple[str, ...]]] = []
        if self.pod is not None:
            out += [(POD_NAME_EXTRA, (self.pod.name,)), (POD_UID_EXTRA, (self.pod.uid,))]
        if self.node is not None:
            out.append((NODE_NAME_EXTRA, (self.node.name,)))
            if self.node.uid:
                out.append((NODE_UID_EXTRA, (self.node.uid,)))
        if self.credential_id:
            out.append((CREDENTIAL_ID_EXTRA, (self.credential_id,)))
        return tuple(out)


def claims(sa: Ref, namespace: str, *, audiences: list[str], now: int, expiration: int, issuer: str = ISSUER,
           warn_after: int = 0, jti: str | None = None, pod: Ref | None = None, secret: Ref | None = None,
           node: Ref | None = None) -> dict[str, Any]:
    """serviceaccount.Claims: the token's claims, issued at `now` (seconds), valid `expiration` seconds.
    A pod-bound token carries the pod's node too (ServiceAccountTokenPodNodeInfo). Pure."""
    private: dict[str, Any] = {"namespace": namespace, "serviceaccount": {"name": sa.name, "uid": sa.uid}}
    if pod is not None:
        private["pod"] = {"name": pod.name, "uid": pod.uid}
    if secret is not None:
        private["secret"] = {"name": secret.name, "uid": secret.uid}
    if node is not None:
        private["node"] = {"name": node.name, **({"uid": node.uid} if node.uid else {})}
    if warn_after:
        private["warnafter"] = now + warn_after
    return {"aud": list(audiences), "exp": now + expiration, "iat": now, "iss": issuer,
            "jti": jti or str(uuid.uuid4()), "kubernetes.io": private, "nbf": now,
            "sub": username(namespace, sa.name)}


@dataclass(frozen=True)
class LegacyToken:
    """What a legacy (Secret-based) token claims: its account (by name and uid) and the Secret holding it."""

    namespace: str
    name: str
    uid: str
    secret: str


class Signer:
    """The API server's service account key: signs tokens, checks them, and publishes its public half."""

    def __init__(self, key: ec.EllipticCurvePrivateKey, *, issuer: str = ISSUER,
                 audiences: tuple[str, ...] | None = None) -> None:
        self.key = key
        self.issuer = issuer
        self.audiences = audiences or (issuer,)  # kube-apiserver's --api-audiences default to the issuer
        self.key_id = satokenkey.key_id(key)

    @classmethod
    def from_file(cls, path: str | Path, **options: Any) -> Signer:
        return cls(satokenkey.load_key(path), **options)

    @classmethod
    def ephemeral(cls, **options: Any) -> Signer:
        """A key of the process's own: tokens die with it (an API server given no key file)."""
        return cls(ec.generate_private_key(ec.SECP256R1()), **options)

    def sign(self, payload: dict[str, Any]) -> str:
        return satokenkey.sign(self.key, payload)

    def is_kube_audience(self, audiences: list[str]) -> bool:
        """TokenREST.isKubeAudiences: every requested audience is one of the API's."""
        return all(a in self.audiences for a in audiences)

    def looks_like_ours(self, token: str) -> bool:
        """Whether a bearer token is a JWT from this issuer (unverified): the JWT authenticator answers only
        for its issuer, other tokens go to the next authenticator (the static token file)."""
        try:
            unverified = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            return False
        return isinstance(unverified, dict) and unverified.get("iss") in (self.issuer, satokenkey.LEGACY_ISSUER)

    @staticmethod
    def is_legacy(token: str) -> bool:
        """Whether a JWT (unverified) claims the legacy issuer of Secret-based tokens."""
        try:
            unverified = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            return False
        return isinstance(unverified, dict) and unverified.get("iss") == satokenkey.LEGACY_ISSUER

    def verify_legacy(self, token: str) -> LegacyToken:
        """A legacy token's claims if its signature is ours (it has no times and no audience), else
        InvalidToken. What it names is the authenticator's to check (auth.py)."""
        try:
            payload = jwt.decode(token, self.key.public_key(), algorithms=[ALGORITHM], issuer=satokenkey.LEGACY_ISSUER,
                                 options={"require": ["sub", "iss"], "verify_aud": False, "verify_exp": False})
        except jwt.InvalidSignatureError as exc:
            raise InvalidToken("go-jose/go-jose: error in cryptographic primitive") from exc
        except jwt.PyJWTError as exc:
            raise InvalidToken(f"service account token claims could not be validated: {exc}") from exc
        values = [payload.get(c) for c in (satokenkey.NAMESPACE_CLAIM, satokenkey.ACCOUNT_NAME_CLAIM,
                                           satokenkey.ACCOUNT_UID_CLAIM, satokenkey.SECRET_NAME_CLAIM)]
        if not all(isinstance(v, str) and v for v in values):
            raise InvalidToken("service account token claims could not be validated due to unexpected private claim")
        namespace, account, uid, secret = (str(v) for v in values)
        if payload["sub"] != username(namespace, account):
            raise InvalidToken("service account token claims could not be validated due to unexpected private claim")
        return LegacyToken(namespace, account, uid, secret)

    def verify(self, token: str, *, audiences: tuple[str, ...] | None = None) -> ServiceAccountInfo:
        """The token's holder if its signature, times (with go-jose's one minute of leeway) and audience
        are good, else InvalidToken in kube's words (pkg/serviceaccount/jwt.go, claims.go). `audiences`
        are the ones asked for (a TokenReview's spec.audiences), the API's by default; the token must
        name one of them, and the holder's `audiences` are those it names."""
        wanted = tuple(audiences) if audiences else self.audiences
        try:
            payload = jwt.decode(token, self.key.public_key(), algorithms=[ALGORITHM], issuer=self.issuer,
                                 leeway=LEEWAY_SECONDS, options={"require": ["exp", "iat", "nbf", "sub", "iss"],
                                                                  "verify_aud": False})
        except jwt.ExpiredSignatureError as exc:
            raise InvalidToken("service account token has expired") from exc
        except jwt.ImmatureSignatureError as exc:
            raise InvalidToken("service account token is not valid yet") from exc
        except jwt.InvalidSignatureError as exc:
            raise InvalidToken("go-jose/go-jose: error in cryptographic primitive") from exc
        except jwt.PyJWTError as exc:
            raise InvalidToken(f"service account token claims could not be validated: {exc}") from exc
        aud = payload.get("aud")
        token_audiences = tuple(a for a in ([aud] if isinstance(aud, str) else aud or []) if isinstance(a, str))
        if not token_audiences:
            token_audiences = self.audiences  # a token naming none has the API's (implicit audiences)
        matched = tuple(a for a in token_audiences if a in wanted)
        if not matched:
            raise InvalidToken(f"token audiences {go_strings(token_audiences)} is invalid for the target audiences "
                               f"{go_strings(wanted)}")
        private = payload.get("kubernetes.io")
        if not isinstance(private, dict):
            raise InvalidToken("service account token claims could not be validated due to unexpected private claim")
        namespace, sa = private.get("namespace"), private.get("serviceaccount")
        if not isinstance(namespace, str) or not namespace or not isinstance(sa, dict):
            raise InvalidToken("service account token claims could not be validated due to unexpected private claim")
        account = _ref(sa)
        if account is None or payload["sub"] != username(namespace, account.name):
            raise InvalidToken("service account token claims could not be validated due to unexpected private claim")
        jti = payload.get("jti")
        return ServiceAccountInfo(namespace, account.name, account.uid, pod=_ref(private.get("pod")),
                                  secret=_ref(private.get("secret")), node=_ref(private.get("node"), uid_optional=True),
                                  credential_id=f"JTI={jti}" if isinstance(jti, str) and jti else "",
                                  audiences=matched)

    def jwks(self) -> dict[str, Any]:
        """/openid/v1/jwks: the public key, as kube-apiserver publishes its service account keys."""
        jwk = jwt.algorithms.ECAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return {"keys": [{"use": "sig", "kty": jwk["kty"], "kid": self.key_id, "crv": jwk["crv"], "alg": ALGORITHM,
                          "x": jwk["x"], "y": jwk["y"]}]}

    def openid_configuration(self) -> dict[str, Any]:
        """/.well-known/openid-configuration (pkg/serviceaccount/openidmetadata.go)."""
        return {"issuer": self.issuer, "jwks_uri": f"{self.issuer}/openid/v1/jwks",
                "response_types_supported": ["id_token"], "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": [ALGORITHM]}


def go_strings(values: tuple[str, ...]) -> str:
    """A []string as Go's %q prints it: ["a" "b"]."""
    return "[" + " ".join(json.dumps(v) for v in values) + "]"


def _ref(value: Any, *, uid_optional: bool = False) -> Ref | None:
    if not isinstance(value, dict):
        return None
    name, uid = value.get("name"), value.get("uid", "")
    if not isinstance(name, str) or not name or not isinstance(uid, str) or (not uid and not uid_optional):
        return None
    return Ref(name, uid)


__all__ = ["ISSUER", "InvalidToken", "Ref", "ServiceAccountInfo", "Signer", "claims", "groups", "username"]
