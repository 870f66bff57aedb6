"""certificates.k8s.io/v1 CertificateSigningRequests: the requestor recorded, validation, and the three
write paths (main, approval, status) as kube-apiserver's certificates strategy has them
(pkg/apis/certificates/validation, pkg/registry/certificates/certificates).

A create records who asked (spec.username, uid, groups, extra) from the authenticated user, whatever
the body said, and clears status. A main update changes metadata only; the approval subresource changes
the conditions only (Approved, Denied); the status subresource the certificate and the other conditions,
keeping the approval ones. Approving, signing and the signers' own checks are kube-controller-manager's
(and the approving user's); kubelab runs no signer, so an approved request stays without a certificate
until something writes one through status.

Not modelled: the ratchets for objects stored by older releases or through v1beta1 (legacy-unknown
signer, unknown or duplicate usages, duplicate or empty condition types, arbitrary certificate bytes),
and the condition diff kube appends to "updates may not modify a condition". The words of a request
that parses as PEM but not as PKCS#10 are Go's x509 parser's, which kubelab approximates with one
message ("x509: malformed certificate request"); a bad signature gets the words of Go's check per key type.
"""

from __future__ import annotations

import base64
import binascii
import re

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from kubelab import timeutil, validation
from kubelab.models import (
    CertificateSigningRequest,
    CertificateSigningRequestCondition,
    CertificateSigningRequestSpec,
    CertificateSigningRequestStatus,
    TypedObject,
)
from kubelab.validation import FieldError, GoLiteral, duplicate, forbidden, invalid, not_supported, required

from .. import errors, requestctx
from .decoding import Base64Error, go_base64
from .strategy import Strategy

# allValidUsages, sorted as sets.NewString(...).List() sorts them.
USAGES = sorted(["signing", "digital signature", "content commitment", "key encipherment", "key agreement",
                 "data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any",
                 "server auth", "client auth", "code signing", "email protection", "s/mime", "ipsec end system",
                 "ipsec tunnel", "ipsec user", "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc"])
LEGACY_UNKNOWN_SIGNER = "kubernetes.io/legacy-unknown"
TRUE_ONLY_TYPES = ("Approved", "Denied", "Failed")
APPROVAL_TYPES = ("Approved", "Denied")
MIN_EXPIRATION_SECONDS = 600
_PEM_BLOCK = re.compile(r"-----BEGIN ([^\n-]*)-----\r?\n(.*?)-----END \1-----", re.DOTALL)


def _pem_blocks(data: bytes) -> list[tuple[str, bytes, bool]]:
    """encoding/pem's Decode, repeated: each block's type, bytes and whether it had headers. A block
    whose body is not base64 is skipped, as pem.Decode skips it."""
    text = data.decode("latin-1")
    blocks = []
    for match in _PEM_BLOCK.finditer(text):
        body = match.group(2)
        has_headers = ":" in body.split("\n", 1)[0]
        if has_headers:
            body = body.split("\n\n", 1)[-1] if "\n\n" in body else ""
        try:
            der = base64.b64decode("".join(body.split()), validate=True)
        except (binascii.Error, ValueError):
            continue
        blocks.append((match.group(1), der, has_headers))
    return blocks


def request_error(request: bytes) -> str | None:
    """certificates.ParseCSR then CheckSignature: None for a well-formed request signed by its own key."""
    blocks = _pem_blocks(request)
    if not blocks or blocks[0][0] != "CERTIFICATE REQUEST":
        return "PEM block type must be CERTIFICATE REQUEST"
    try:
        csr = x509.load_der_x509_csr(blocks[0][1])
        key = csr.public_key()
        valid = csr.is_signature_valid
    except (ValueError, TypeError, x509.UnsupportedGeneralNameType):
        return "x509: malformed certificate request"
    if valid:
        return None
    if isinstance(key, rsa.RSAPublicKey):
        return "crypto/rsa: verification error"
    if isinstance(key, ec.EllipticCurvePublicKey):
        return "x509: ECDSA verification failure"
    if isinstance(key, ed25519.Ed25519PublicKey):
        return "x509: Ed25519 verification failure"
    return "x509: cannot verify signature: algorithm unimplemented"


def certificate_error(data: bytes) -> str | None:
    """validateCertificate: empty, or only CERTIFICATE blocks without headers, each holding certificates."""
    if not data:
        return None
    blocks = _pem_blocks(data)
    for kind, der, has_headers in blocks:
        if kind != "CERTIFICATE":
            return f"only CERTIFICATE PEM blocks are allowed, found {validation.go_quote(kind)}"
        if has_headers:
            return "no PEM block headers are permitted"
        try:
            x509.load_der_x509_certificate(der)
        except ValueError:
            return "x509: malformed certificate"
    return None if blocks else "must contain at least one CERTIFICATE PEM block"


def signer_name_errors(path: str, name: str) -> list[FieldError]:
    """ValidateSignerName: `example.com/signer-name`, the domain of DNS labels (two at least), the path of
    DNS subdomains, 571 bytes at most."""
    if not name:
        return [required(path)]
    segments = name.split("/")
    if len(segments) != 2:
        return [invalid(path, name, "must be a fully qualified domain and path of the form "
                                    "'example.com/signer-name'")]
    domain, rest = segments
    errs: list[FieldError] = []
    if validation.go_len(domain) > 253:
        errs.append(FieldError("TooLong", path, "", "must have at most 253 bytes"))
    labels = domain.split(".")
    for label in labels:
        problems = validation.dns1123_label_errors(label)
        if problems:
            errs += [invalid(path, domain, f"validating label {validation.go_quote(label)}: {p}") for p in problems]
            break
    if len(labels) < 2:
        errs.append(invalid(path, domain, "should be a domain with at least two segments separated by dots"))
    for label in rest.split("."):
        problems = validation.dns1123_subdomain_errors(label)
        if problems:
            errs += [invalid(path, rest, f"validating label {validation.go_quote(label)}: {p}") for p in problems]
            break
    if validation.go_len(name) > 253 + 63 + 1 + 253 + 1:
        errs.append(FieldError("TooLong", path, "", f"must have at most {253 + 63 + 1 + 253 + 1} bytes"))
    return errs


def _go_bytes(data: bytes) -> GoLiteral:
    """A []byte as field.Invalid prints it (%#v)."""
    return GoLiteral("[]byte{" + ", ".join(f"0x{b:x}" for b in data) + "}")


def _raw(value: str | None) -> bytes:
    return base64.b64decode(value) if value else b""


def _conditions(obj: CertificateSigningRequest) -> list[CertificateSigningRequestCondition]:
    return list((obj.status.conditions if obj.status else None) or [])


def _of_type(obj: CertificateSigningRequest, kind: str) -> list[dict[str, object]]:
    return [c.to_dict() for c in _conditions(obj) if c.type == kind]


class CertificateSigningRequestStrategy(Strategy):
    has_status = True

    def set_defaults(self, obj: TypedObject) -> None:
        """Decoding: spec.request and status.certificate are []byte (Go's base64); v1's
        SetDefaults_CertificateSigningRequestCondition makes a condition without a status True."""
        assert isinstance(obj, CertificateSigningRequest)
        try:
            if obj.spec is not None and obj.spec.request is not None:
                obj.spec.request = go_base64(obj.spec.request)
            if obj.status is not None and obj.status.certificate is not None:
                obj.status.certificate = go_base64(obj.status.certificate)
        except Base64Error as exc:
            raise errors.bad_request('CertificateSigningRequest in version "v1" cannot be handled as a '
                                     f"CertificateSigningRequest: {exc}") from None
        for condition in _conditions(obj):
            condition.status = condition.status or "True"

    def prepare_create(self, obj: TypedObject) -> None:
        """csrStrategy.PrepareForCreate: the requestor is the authenticated user; status is cleared."""
        super().prepare_create(obj)
        assert isinstance(obj, CertificateSigningRequest)
        spec = obj.spec = obj.spec or CertificateSigningRequestSpec()
        user = requestctx.user.get()
        spec.username = user.name if user and user.name else None
        spec.uid = user.uid if user and user.uid else None
        spec.groups = list(user.groups) if user and user.groups else None
        spec.extra = {k: list(v) for k, v in user.extra} if user and user.extra else None
        obj.status = None

    def fill_status(self, obj: TypedObject) -> None:
        # CertificateSigningRequestStatus is a struct: `"status": {}` before anything wrote it.
        assert isinstance(obj, CertificateSigningRequest)
        obj.status = obj.status or CertificateSigningRequestStatus()

    def prepare_update(self, new: TypedObject, old: TypedObject, subresource: str | None) -> None:
        assert isinstance(new, CertificateSigningRequest) and isinstance(old, CertificateSigningRequest)
        super().prepare_update(new, old, "status" if subresource == "approval" else subresource)
        new.spec = old.spec  # every path keeps the spec
        if subresource == "approval":  # csrApprovalStrategy: the conditions only
            new.status = new.status or CertificateSigningRequestStatus()
            new.status.certificate = old.status.certificate if old.status else None
        elif subresource == "status" and new.status is not None and new.status.conditions:
            # csrStatusStrategy's preserveConditionInstances: the approval conditions stay as stored, in
            # place, when the write has as many of each type; one added or removed is left for validation
            # to refuse.
            for kind in APPROVAL_TYPES:
                old_at = [c for c in _conditions(old) if c.type == kind]
                new_at = [i for i, c in enumerate(new.status.conditions) if c.type == kind]
                if len(old_at) == len(new_at):
                    for i, condition in zip(new_at, old_at, strict=True):
                        new.status.conditions[i] = condition.copy_deep()
        if subresource is not None:
            _stamp_conditions(new, old)

    def validate_create(self, obj: TypedObject) -> list[FieldError]:
        assert isinstance(obj, CertificateSigningRequest)
        return self.validate_meta(obj) + _validate(obj, allow_legacy=False)

    def validate_meta(self, obj: TypedObject) -> list[FieldError]:
        # ValidateCertificateRequestName: "We don't care what you call your certificate requests."
        meta = obj.metadata
        if not meta.name and not meta.generate_name:
            return [required("metadata.name", "name or generateName is required")]
        return (validation.validate_labels(meta.labels, "metadata.labels")
                + validation.validate_annotations(meta.annotations, "metadata.annotations"))

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        """validateCertificateSigningRequestUpdate: the object again, no approval condition removed, none
        added or changed outside the approval subresource, the certificate set only through status and once."""
        assert isinstance(new, CertificateSigningRequest) and isinstance(old, CertificateSigningRequest)
        errs = _validate(new, allow_legacy=bool(old.spec and old.spec.signer_name == LEGACY_UNKNOWN_SIGNER),
                         allow_any_certificate=_raw(new.status.certificate if new.status else None)
                         == _raw(old.status.certificate if old.status else None))
        for kind in TRUE_ONLY_TYPES:
            if len(_of_type(new, kind)) < len(_of_type(old, kind)):
                errs.append(forbidden("status.conditions", f'updates may not remove a condition of type "{kind}"'))
        if subresource != "approval":
            for kind in APPROVAL_TYPES:
                before, after = _of_type(old, kind), _of_type(new, kind)
                if len(after) > len(before):
                    errs.append(forbidden("status.conditions", f'updates may not add a condition of type "{kind}"'))
                elif len(after) == len(before) and after != before:
                    errs.append(forbidden("status.conditions", f'updates may not modify a condition of type "{kind}"'))
        new_cert = _raw(new.status.certificate if new.status else None)
        old_cert = _raw(old.status.certificate if old.status else None)
        if new_cert != old_cert:
            if subresource != "status":
                errs.append(forbidden("status.certificate", "updates may not set certificate content"))
            elif old_cert:
                errs.append(forbidden("status.certificate", "updates may not modify existing certificate content"))
        return errs + self.validate_meta_update(new, old)


def _stamp_conditions(new: CertificateSigningRequest, old: CertificateSigningRequest) -> None:
    """populateConditionTimestamps: a condition without lastUpdateTime gets now; without
    lastTransitionTime, the old one of its type when the status did not change, else now."""
    now = timeutil.rfc3339()
    previous = {c.type: c for c in _conditions(old)}
    for condition in _conditions(new):
        condition.last_update_time = condition.last_update_time or now
        if not condition.last_transition_time:
            was = previous.get(condition.type)
            same = was is not None and was.status == condition.status and was.last_transition_time
            condition.last_transition_time = was.last_transition_time if same and was else now


def _validate(obj: CertificateSigningRequest, *, allow_legacy: bool, allow_any_certificate: bool = False
              ) -> list[FieldError]:
    """validateCertificateSigningRequest past the metadata, in its order and words."""
    spec = obj.spec or CertificateSigningRequestSpec()
    errs: list[FieldError] = []
    request = _raw(spec.request)
    problem = request_error(request)
    if problem is not None:
        errs.append(invalid("spec.request", _go_bytes(request), problem))
    usages = spec.usages or []
    if not usages:
        errs.append(required("spec.usages"))
    errs += [not_supported(f"spec.usages[{i}]", u, USAGES) for i, u in enumerate(usages) if u not in USAGES]
    errs += [duplicate(f"spec.usages[{i}]", u) for i, u in enumerate(usages) if u in usages[:i]]
    signer = spec.signer_name or ""
    if signer == LEGACY_UNKNOWN_SIGNER and not allow_legacy:
        errs.append(invalid("spec.signerName", signer, "the legacy signerName is not allowed via this API version"))
    else:
        errs += signer_name_errors("spec.signerName", signer)
    if spec.expiration_seconds is not None and spec.expiration_seconds < MIN_EXPIRATION_SECONDS:
        errs.append(invalid("spec.expirationSeconds", spec.expiration_seconds,
                            "may not specify a duration less than 600 seconds (10 minutes)"))
    errs += _condition_errors(obj)
    if not allow_any_certificate:
        problem = certificate_error(_raw(obj.status.certificate if obj.status else None))
        if problem is not None:
            errs.append(invalid("status.certificate", "<certificate data>", problem))
    return errs


def _condition_errors(obj: CertificateSigningRequest) -> list[FieldError]:
    """validateConditions: a type; a status (True only for Approved, Denied, Failed); Approved and Denied
    not both; each type once."""
    errs: list[FieldError] = []
    seen: set[str] = set()
    approved = denied = False
    for i, c in enumerate(_conditions(obj)):
        path = f"status.conditions[{i}]"
        kind = c.type or ""
        if not kind:
            errs.append(required(f"{path}.type"))
        allowed = ["True"] if kind in TRUE_ONLY_TYPES else ["False", "True", "Unknown"]
        if not c.status:
            errs.append(required(f"{path}.status"))
        elif c.status not in allowed:
            errs.append(not_supported(f"{path}.status", c.status, allowed))
        if kind == "Approved":
            approved = True
            if denied:
                errs.append(invalid(f"{path}.type", kind, "Approved and Denied conditions are mutually exclusive"))
        elif kind == "Denied":
            denied = True
            if approved:
                errs.append(invalid(f"{path}.type", kind, "Approved and Denied conditions are mutually exclusive"))
        if kind in seen:
            errs.append(duplicate(f"{path}.type", kind))
        seen.add(kind)
    return errs
