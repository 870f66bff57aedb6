"""apiregistration.k8s.io/v1 APIService: defaults and validation as kube-aggregator's strategy has them.

The name must be `<version>.<group>` (`v1.` for the core group). A "Local" APIService (no `service`) is
answered by the API server itself; one naming a Service would be proxied there by kube-aggregator, which
kubelab does not run: such objects are stored and listed, and their status is left to whoever writes it.
"""

from __future__ import annotations

import base64
import binascii

from kubelab import validation
from kubelab.models import APIService, TypedObject
from kubelab.validation import FieldError, invalid, required

from .strategy import Strategy


class APIServiceStrategy(Strategy):
    name_check = staticmethod(validation.path_segment_name_errors)

    def set_defaults(self, obj: TypedObject) -> None:
        assert isinstance(obj, APIService)
        service = obj.spec.service if obj.spec else None
        if service is not None and service.port is None:
            service.port = 443  # SetDefaults_ServiceReference

    def prepare_create(self, obj: TypedObject) -> None:
        super().prepare_create(obj)
        assert isinstance(obj, APIService)
        obj.status = None  # apiserviceStrategy.PrepareForCreate: status is the availability controller's

    def validate_create(self, obj: TypedObject) -> list[FieldError]:
        assert isinstance(obj, APIService)
        return self.validate_meta(obj) + validate_spec(obj)

    def validate_meta(self, obj: TypedObject) -> list[FieldError]:
        assert isinstance(obj, APIService)
        errs = super().validate_meta(obj)
        spec = obj.spec
        wanted = f"{(spec.version if spec else None) or ''}.{(spec.group if spec else None) or ''}"
        name = obj.metadata.name
        if name and not validation.path_segment_name_errors(name) and name != wanted:
            errs.insert(0, invalid("metadata.name", name,
                                   f'must be `spec.version+"."+spec.group`: {validation.go_quote(wanted)}'))
        return errs

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        assert isinstance(new, APIService)
        if subresource == "status":
            return self.validate_meta_update(new, old) + _validate_status(new)
        return super().validate_update(new, old) + validate_spec(new)


def validate_spec(obj: APIService) -> list[FieldError]:
    """ValidateAPIService past the name, in its order and words."""
    spec = obj.spec
    group = (spec.group if spec else None) or ""
    version = (spec.version if spec else None) or ""
    errs: list[FieldError] = []
    if not group and version != "v1":
        errs.append(required("spec.group", "only v1 may have an empty group and it better be legacy kube"))
    if group:
        errs += [invalid("spec.group", group, p) for p in validation.dns1123_subdomain_errors(group)]
    errs += [invalid("spec.version", version, p) for p in validation.dns1035_label_errors(version)]
    group_priority = (spec.group_priority_minimum if spec else None) or 0
    if not 0 < group_priority <= 20000:
        errs.append(invalid("spec.groupPriorityMinimum", group_priority, "must be positive and less than 20000"))
    version_priority = (spec.version_priority if spec else None) or 0
    if not 0 < version_priority <= 1000:
        errs.append(invalid("spec.versionPriority", version_priority, "must be positive and less than 1000"))
    service = spec.service if spec else None
    ca_bundle = (spec.ca_bundle if spec else None) or ""
    skip_verify = bool(spec.insecure_skip_tls_verify) if spec else False
    if service is None:
        if ca_bundle:
            errs.append(invalid("spec.caBundle", f"{len(_bytes(ca_bundle))} bytes",
                                "local APIServices may not have a caBundle"))
        if skip_verify:
            errs.append(invalid("spec.insecureSkipTLSVerify", True, "local APIServices may not have insecureSkipTLSVerify"))
        return errs
    if not service.namespace:
        errs.append(required("spec.service.namespace"))
    if not service.name:
        errs.append(required("spec.service.name"))
    port = service.port or 0
    if not 1 <= port <= 65535:
        errs.append(invalid("spec.service.port", port,
                            "port is not valid: " + ", ".join(validation.port_number_errors(port))))
    if skip_verify and ca_bundle:
        errs.append(invalid("spec.insecureSkipTLSVerify", True, "may not be true if caBundle is present"))
    return errs


def _validate_status(obj: APIService) -> list[FieldError]:
    conditions = (obj.status.conditions if obj.status else None) or []
    return [validation.not_supported(f"status.conditions[{i}].status", c.get("status"), ["True", "False", "Unknown"])
            for i, c in enumerate(conditions) if c.get("status") not in ("True", "False", "Unknown")]


def _bytes(ca_bundle: str) -> bytes:
    """caBundle is []byte in Go: base64 on the wire; kube counts the decoded bytes."""
    try:
        return base64.b64decode(ca_bundle, validate=True)
    except (binascii.Error, ValueError):
        return ca_bundle.encode()
