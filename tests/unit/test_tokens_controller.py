"""The token controller's decisions (controllers/tokens.py), pure: what a legacy token Secret lacks, and
whether the account it names is gone (kube's tokens_controller.go)."""

from __future__ import annotations

import base64
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec

from controllers.tokens import NAME_ANNOTATION, UID_ANNOTATION, needed_update, references_gone_account

KEY = ec.generate_private_key(ec.SECP256R1())
ACCOUNT = {"metadata": {"name": "bot", "namespace": "ns", "uid": "u-1"}}


def secret(**data: str) -> dict[str, Any]:
    return {"metadata": {"name": "bot-token", "namespace": "ns", "annotations": {NAME_ANNOTATION: "bot"}},
            "type": "kubernetes.io/service-account-token",
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def test_an_empty_secret_gets_token_ca_namespace_and_the_uid() -> None:
    out = needed_update(secret(), ACCOUNT, key=KEY, root_ca="CA")
    assert out is not None
    data = {k: base64.b64decode(v).decode() for k, v in out["data"].items()}
    assert (data["ca.crt"], data["namespace"]) == ("CA", "ns")
    claims = jwt.decode(data["token"], KEY.public_key(), algorithms=["ES256"])
    assert claims["kubernetes.io/serviceaccount/secret.name"] == "bot-token"
    assert claims["kubernetes.io/serviceaccount/service-account.uid"] == "u-1"
    assert out["metadata"]["annotations"][UID_ANNOTATION] == "u-1"


def test_a_filled_secret_is_left_alone_and_its_token_never_resigned() -> None:
    assert needed_update(secret(token="t", namespace="ns", **{"ca.crt": "CA"}), ACCOUNT, key=KEY, root_ca="CA") is None
    out = needed_update(secret(token="t", namespace="ns", **{"ca.crt": "old"}), ACCOUNT, key=KEY, root_ca="CA")
    assert out is not None and base64.b64decode(out["data"]["token"]) == b"t"
    assert needed_update(secret(token="t", namespace="ns"), ACCOUNT, key=KEY, root_ca=None) is None


def test_an_account_that_is_gone_or_another_one() -> None:
    assert references_gone_account(secret(), None)
    assert not references_gone_account(secret(), ACCOUNT)
    other = secret()
    other["metadata"]["annotations"][UID_ANNOTATION] = "u-0"  # the account was deleted and made again
    assert references_gone_account(other, ACCOUNT)
