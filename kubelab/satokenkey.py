"""The service account signing key and the legacy (Secret-based) service account token, shared by the API
server (which signs bound tokens and checks every token) and the token controller (which signs the tokens
it puts into `kubernetes.io/service-account-token` Secrets, as kube-controller-manager does with
--service-account-private-key-file, the same key pair as the API server's).

A legacy token is kube's (pkg/serviceaccount/legacy.go): issuer `kubernetes/serviceaccount`, no audience,
no expiry; its claims name the namespace, the Secret and the service account (name and uid). It is valid
as long as that Secret holds it and the account is the same one (the API server's check).
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

ALGORITHM = "ES256"
LEGACY_ISSUER = "kubernetes/serviceaccount"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
# The claims of a legacy token (legacyPrivateClaims).
NAMESPACE_CLAIM = "kubernetes.io/serviceaccount/namespace"
SECRET_NAME_CLAIM = "kubernetes.io/serviceaccount/secret.name"
ACCOUNT_NAME_CLAIM = "kubernetes.io/serviceaccount/service-account.name"
ACCOUNT_UID_CLAIM = "kubernetes.io/serviceaccount/service-account.uid"


def load_key(path: str | Path) -> ec.EllipticCurvePrivateKey:
    """A P-256 private key (PEM), or ValueError."""
    key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey) or not isinstance(key.curve, ec.SECP256R1):
        raise ValueError(f"{path}: not a P-256 EC private key (ES256)")  # noqa: TRY004 - a bad file
    return key


def key_id(key: ec.EllipticCurvePrivateKey) -> str:
    """keyIDFromPublicKey: the unpadded base64url of the SHA-256 of the DER public key."""
    der = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.urlsafe_b64encode(hashlib.sha256(der).digest()).decode().rstrip("=")


def sign(key: ec.EllipticCurvePrivateKey, payload: dict[str, Any]) -> str:
    return jwt.encode(payload, key, algorithm=ALGORITHM, headers={"kid": key_id(key)})


def legacy_claims(namespace: str, *, account: str, account_uid: str, secret: str) -> dict[str, Any]:
    """serviceaccount.LegacyClaims. Pure."""
    return {"iss": LEGACY_ISSUER, NAMESPACE_CLAIM: namespace, SECRET_NAME_CLAIM: secret,
            ACCOUNT_NAME_CLAIM: account, ACCOUNT_UID_CLAIM: account_uid,
            "sub": f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{account}"}


__all__ = ["LEGACY_ISSUER", "key_id", "legacy_claims", "load_key", "sign"]
