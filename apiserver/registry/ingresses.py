"""networking.k8s.io/v1 Ingresses and IngressClasses: defaults, validation and generation as
kube-apiserver's ingress and ingressclass strategies have them (pkg/apis/networking/validation, 1.32).

kube-apiserver only stores and validates these; routing by them is an ingress controller's work, which
kube-apiserver does not do and kubelab does not run either (status.loadBalancer is the controller's to
write, through the status subresource). A create with the `kubernetes.io/ingress.class` annotation and no
spec.ingressClassName is warned that the annotation is deprecated, as kube's WarningsOnCreate does. Not
modelled: the validation ratchets for objects stored by an older release (an invalid TLS secretName or
wildcard-host rule kept on update), which no kubelab-stored object can need.
"""

from __future__ import annotations

import ipaddress

from kubelab import validation
from kubelab.models import (
    Ingress,
    IngressBackend,
    IngressClass,
    IngressClassParametersReference,
    IngressLoadBalancerStatus,
    IngressSpec,
    IngressStatus,
    TypedObject,
)
from kubelab.validation import FieldError, GoLiteral, GoRegexp, forbidden, invalid, not_supported, required

from .strategy import Strategy

INGRESS_CLASS_ANNOTATION = "kubernetes.io/ingress.class"
PATH_TYPES = ["Exact", "ImplementationSpecific", "Prefix"]  # sets.NewString(...).List(): sorted
PARAMETER_SCOPES = ["Cluster", "Namespace"]
MAX_CONTROLLER_LENGTH = 250
_INVALID_PATH_SEQUENCES = ("//", "/./", "/../", "%2f", "%2F")
_INVALID_PATH_SUFFIXES = ("/..", "/.")

_WILDCARD_FMT = r"\*\." + validation.DNS1123_SUBDOMAIN_FMT
_WILDCARD = GoRegexp(_WILDCARD_FMT)
_WILDCARD_MSG = ("a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must "
                 "consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character "
                 f"(e.g. '*.example.com', regex used for validation is '{_WILDCARD_FMT}')")
_HTTP_PATH_FMT = r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+"
_HTTP_PATH = GoRegexp(_HTTP_PATH_FMT)


def is_ip_sloppy(text: str) -> bool:
    """netutils.ParseIPSloppy(text) != nil: Go's old net.ParseIP, which takes IPv4 octets with leading zeros."""
    if "%" in text:
        return False
    if ":" in text:
        try:
            ipaddress.IPv6Address(text)
        except ValueError:
            return False
        return True
    octets = text.split(".")
    return len(octets) == 4 and all(validation.is_ascii_digits(o) and len(o) <= 3 and int(o) < 256 for o in octets)


def wildcard_subdomain_errors(value: str) -> list[str]:
    """validation.IsWildcardDNS1123Subdomain."""
    problems = ["must be no more than 253 characters"] if validation.go_len(value) > 253 else []
    if not _WILDCARD.matches(value):
        problems.append(_WILDCARD_MSG)
    return problems


def domain_prefixed_path_errors(path: str, value: str) -> list[FieldError]:
    """validation.IsDomainPrefixedPath: `acme.io/foo`, a DNS subdomain, '/', and an HTTP path."""
    if not value:
        return [required(path)]
    host, sep, rest = value.partition("/")
    if not sep or not host or not rest:
        return [invalid(path, value, 'must be a domain-prefixed path (such as "acme.io/foo")')]
    errs = [invalid(path, host, p) for p in validation.dns1123_subdomain_errors(host)]
    if not _HTTP_PATH.matches(rest):
        errs.append(invalid(path, rest, f"Invalid path (regex used for validation is '{_HTTP_PATH_FMT}')"))
    return errs


class IngressStrategy(Strategy):
    counts_spec_generation = True

    def prepare_create(self, obj: TypedObject) -> None:
        super().prepare_create(obj)
        assert isinstance(obj, Ingress)
        obj.status = None  # ingressStrategy.PrepareForCreate: status is the ingress controller's

    def fill_status(self, obj: TypedObject) -> None:
        # IngressStatus.LoadBalancer is a struct, which Go's omitempty never omits: an Ingress no controller
        # reported on reads `"status": {"loadBalancer": {}}`, as kube-apiserver serves it.
        assert isinstance(obj, Ingress)
        obj.status = obj.status or IngressStatus()
        obj.status.load_balancer = obj.status.load_balancer or IngressLoadBalancerStatus()

    def validate_create(self, obj: TypedObject) -> list[FieldError]:
        """ValidateIngressCreate: the object, then the class annotation against spec.ingressClassName."""
        assert isinstance(obj, Ingress)
        errs = self.validate_meta(obj) + ingress_spec_errors(obj.spec or IngressSpec(), "spec")
        annotation = (obj.metadata.annotations or {}).get(INGRESS_CLASS_ANNOTATION)
        class_name = obj.spec.ingress_class_name if obj.spec else None
        if annotation is not None and class_name is not None and annotation != class_name:
            # kube's path starts at "annotations", not "metadata.annotations".
            errs.append(invalid(f"annotations.{INGRESS_CLASS_ANNOTATION}", annotation,
                                "must match `ingressClassName` when both are specified"))
        return errs

    def warnings_on_create(self, obj: TypedObject) -> list[str]:
        """ingressStrategy.WarningsOnCreate: the class annotation without spec.ingressClassName is
        deprecated (updates are not warned: its WarningsOnUpdate returns nothing)."""
        assert isinstance(obj, Ingress)
        if INGRESS_CLASS_ANNOTATION in (obj.metadata.annotations or {}) and not (
                obj.spec and obj.spec.ingress_class_name is not None):
            return [f"annotation \"{INGRESS_CLASS_ANNOTATION}\" is deprecated, please use 'spec.ingressClassName' instead"]
        return []

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        assert isinstance(new, Ingress) and isinstance(old, Ingress)
        errs = self.validate_meta_update(new, old)
        if subresource == "status":
            return errs + load_balancer_status_errors(new, old)
        return errs + self.validate_meta(new) + ingress_spec_errors(new.spec or IngressSpec(), "spec")


def ingress_spec_errors(spec: IngressSpec, path: str) -> list[FieldError]:
    """ValidateIngressSpec, in its order and words."""
    errs: list[FieldError] = []
    if not spec.rules and spec.default_backend is None:
        rules = GoLiteral("[]networking.IngressRule(nil)" if spec.rules is None else "[]networking.IngressRule{}")
        errs.append(invalid(path, rules, "either `defaultBackend` or `rules` must be specified"))
    if spec.default_backend is not None:
        errs += _backend_errors(spec.default_backend, f"{path}.defaultBackend")
    for i, rule in enumerate(spec.rules or []):
        rpath = f"{path}.rules[{i}]"
        if rule.host:
            if is_ip_sloppy(rule.host):
                errs.append(invalid(f"{rpath}.host", rule.host, "must be a DNS name, not an IP address"))
            problems = (wildcard_subdomain_errors(rule.host) if "*" in rule.host
                        else validation.dns1123_subdomain_errors(rule.host))
            errs += [invalid(f"{rpath}.host", rule.host, p) for p in problems]
        if rule.http is not None:
            if not rule.http.paths:
                errs.append(required(f"{rpath}.http.paths"))
            for j, http_path in enumerate(rule.http.paths or []):
                errs += _http_path_errors(http_path.path or "", http_path.path_type, http_path.backend,
                                          f"{rpath}.http.paths[{j}]")
    for i, tls in enumerate(spec.tls or []):
        for j, host in enumerate(tls.hosts or []):
            problems = wildcard_subdomain_errors(host) if "*" in host else validation.dns1123_subdomain_errors(host)
            errs += [invalid(f"{path}.tls[{i}].hosts[{j}]", host, p) for p in problems]
        if tls.secret_name:
            errs += [invalid(f"{path}.tls[{i}].secretName", tls.secret_name, p)
                     for p in validation.dns1123_subdomain_errors(tls.secret_name)]
    if spec.ingress_class_name is not None:
        errs += [invalid(f"{path}.ingressClassName", spec.ingress_class_name, p)
                 for p in validation.dns1123_subdomain_errors(spec.ingress_class_name)]
    return errs


def _http_path_errors(value: str, path_type: str | None, backend: IngressBackend | None, path: str
                      ) -> list[FieldError]:
    """validateHTTPIngressPath: a pathType is required in v1; Exact and Prefix paths are absolute and clean."""
    if path_type is None:
        return [required(f"{path}.pathType", "pathType must be specified")]
    errs: list[FieldError] = []
    if path_type in ("Exact", "Prefix"):
        if not value.startswith("/"):
            errs.append(invalid(f"{path}.path", value, "must be an absolute path"))
        errs += [invalid(f"{path}.path", value, f"must not contain '{seq}'")
                 for seq in _INVALID_PATH_SEQUENCES if seq in value]
        errs += [invalid(f"{path}.path", value, f"cannot end with '{suffix}'")
                 for suffix in _INVALID_PATH_SUFFIXES if value.endswith(suffix)]
    elif path_type == "ImplementationSpecific":
        if value and not value.startswith("/"):
            errs.append(invalid(f"{path}.path", value, "must be an absolute path"))
    else:
        errs.append(not_supported(f"{path}.pathType", path_type, PATH_TYPES))
    return errs + _backend_errors(backend or IngressBackend(), f"{path}.backend")


def _backend_errors(backend: IngressBackend, path: str) -> list[FieldError]:
    """validateIngressBackend: exactly one of a Service (by DNS-1035 name, and a port by name or number) or
    a typed resource."""
    if backend.resource is not None and backend.service is not None:
        return [invalid(path, "", "cannot set both resource and service backends")]
    if backend.resource is not None:
        ref = backend.resource
        errs: list[FieldError] = []
        if ref.api_group is not None:
            errs += [invalid(f"{path}.resource.apiGroup", ref.api_group, p)
                     for p in validation.dns1123_subdomain_errors(ref.api_group)]
        errs += _segment_errors(ref.kind, f"{path}.resource.kind")
        errs += _segment_errors(ref.name, f"{path}.resource.name")
        return errs
    if backend.service is None:
        return [invalid(path, "", "resource or service backend is required")]
    service = backend.service
    errs = []
    if not service.name:
        errs.append(required(f"{path}.service.name"))
    else:  # ValidateServiceName: a DNS-1035 label (RelaxedServiceNameValidation is not in 1.32)
        errs += [invalid(f"{path}.service.name", service.name, p)
                 for p in validation.dns1035_label_errors(service.name)]
    port_name = service.port.name if service.port else None
    port_number = service.port.number if service.port else None
    if port_name and port_number:
        errs.append(invalid(path, "", "cannot set both port name & port number"))
    elif port_name:
        errs += [invalid(f"{path}.service.port.name", port_name, p) for p in validation.port_name_errors(port_name)]
    elif port_number:
        errs += [invalid(f"{path}.service.port.number", port_number, p)
                 for p in validation.port_number_errors(port_number)]
    else:
        errs.append(required(path, "port name or number is required"))
    return errs


def _segment_errors(value: str | None, path: str) -> list[FieldError]:
    """A required kind or name that must stand as a URL path segment (IsValidPathSegmentName)."""
    if not value:
        return [required(path)]
    return [invalid(path, value, p) for p in validation.path_segment_name_errors(value)]


def load_balancer_status_errors(new: Ingress, old: Ingress) -> list[FieldError]:
    """ValidateIngressLoadBalancerStatus: each reported point is an IP or a DNS name (an IP already stored
    is kept even if it would not pass today)."""
    lb = new.status.load_balancer if new.status else None
    old_lb = old.status.load_balancer if old.status else None
    existing = {i.ip for i in ((old_lb.ingress if old_lb else None) or []) if i.ip}
    errs: list[FieldError] = []
    for i, point in enumerate((lb.ingress if lb else None) or []):
        path = f"status.loadBalancer.ingress[{i}]"
        if point.ip and point.ip not in existing and not is_ip_sloppy(point.ip):
            errs.append(invalid(f"{path}.ip", point.ip, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"))
        if point.hostname:
            errs += [invalid(f"{path}.hostname", point.hostname, p)
                     for p in validation.dns1123_subdomain_errors(point.hostname)]
            if is_ip_sloppy(point.hostname):
                errs.append(invalid(f"{path}.hostname", point.hostname, "must be a DNS name, not an IP address"))
    return errs


class IngressClassStrategy(Strategy):
    has_status = False
    counts_spec_generation = True

    def set_defaults(self, obj: TypedObject) -> None:
        """SetDefaults_IngressClass: a parameters reference without a scope is cluster-scoped."""
        assert isinstance(obj, IngressClass)
        params = obj.spec.parameters if obj.spec else None
        if params is not None and params.scope is None:
            params.scope = "Cluster"

    def validate_create(self, obj: TypedObject) -> list[FieldError]:
        assert isinstance(obj, IngressClass)
        return self.validate_meta(obj) + ingress_class_spec_errors(obj)

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        """ValidateIngressClassUpdate: the metadata update, the immutable controller, then the whole class."""
        assert isinstance(new, IngressClass) and isinstance(old, IngressClass)
        errs = self.validate_meta_update(new, old)
        new_controller = (new.spec.controller if new.spec else None) or ""
        old_controller = (old.spec.controller if old.spec else None) or ""
        if new_controller != old_controller:
            errs.append(invalid("spec.controller", new_controller, "field is immutable"))
        return errs + self.validate_create(new)


def ingress_class_spec_errors(obj: IngressClass) -> list[FieldError]:
    """validateIngressClassSpec."""
    controller = (obj.spec.controller if obj.spec else None) or ""
    errs: list[FieldError] = []
    if not controller:
        errs.append(required("spec.controller"))
    else:
        if validation.go_len(controller) > MAX_CONTROLLER_LENGTH:
            errs.append(FieldError("TooLong", "spec.controller", "",
                                   f"must have at most {MAX_CONTROLLER_LENGTH} bytes"))
        errs += domain_prefixed_path_errors("spec.controller", controller)
    params = obj.spec.parameters if obj.spec else None
    if params is not None:
        errs += _parameters_errors(params, "spec.parameters")
    return errs


def _parameters_errors(params: IngressClassParametersReference, path: str) -> list[FieldError]:
    """validateIngressClassParametersReference: a kind and name, and a scope of Cluster (no namespace) or
    Namespace (with one)."""
    errs: list[FieldError] = []
    if params.api_group is not None:
        errs += [invalid(f"{path}.apiGroup", params.api_group, p)
                 for p in validation.dns1123_subdomain_errors(params.api_group)]
    errs += _segment_errors(params.kind, f"{path}.kind")
    errs += _segment_errors(params.name, f"{path}.name")
    if params.scope is None:
        return errs + [required(f"{path}.scope")]
    if params.scope not in PARAMETER_SCOPES:
        return errs + [not_supported(f"{path}.scope", params.scope, PARAMETER_SCOPES)]
    if params.scope == "Namespace":
        if params.namespace is None:
            errs.append(required(f"{path}.namespace", "`parameters.scope` is set to 'Namespace'"))
        else:
            errs += [invalid(f"{path}.namespace", params.namespace, p)
                     for p in validation.dns1123_label_errors(params.namespace)]
    if params.scope == "Cluster" and params.namespace is not None:
        errs.append(forbidden(f"{path}.namespace", "`parameters.scope` is set to 'Cluster'"))
    return errs
