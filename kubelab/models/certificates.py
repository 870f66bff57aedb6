"""certificates.k8s.io/v1 CertificateSigningRequest: a PKCS#10 request for a signer to sign.

kube-apiserver stores, validates and records who asked; approving is a user's or an approver's write
(the approval subresource) and signing a signer's (the status subresource). kube-controller-manager's
signers and approvers are not part of kubelab, so no certificate is ever issued by itself.
"""

from __future__ import annotations

from .base import Model
from .meta import TypedObject


class CertificateSigningRequestSpec(Model):
    request: str | None = None  # []byte: base64 of a PEM "CERTIFICATE REQUEST" block
    signer_name: str | None = None
    expiration_seconds: int | None = None
    usages: list[str] | None = None
    # Who asked: set by the API server from the authenticated user, whatever the body said.
    username: str | None = None
    uid: str | None = None
    groups: list[str] | None = None
    extra: dict[str, list[str]] | None = None


class CertificateSigningRequestCondition(Model):
    type: str | None = None
    status: str | None = None
    reason: str | None = None
    message: str | None = None
    last_update_time: str | None = None
    last_transition_time: str | None = None


class CertificateSigningRequestStatus(Model):
    conditions: list[CertificateSigningRequestCondition] | None = None
    certificate: str | None = None  # []byte: base64 of PEM CERTIFICATE blocks


class CertificateSigningRequest(TypedObject):
    spec: CertificateSigningRequestSpec | None = None
    status: CertificateSigningRequestStatus | None = None

