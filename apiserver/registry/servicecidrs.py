"""networking.k8s.io/v1 ServiceCIDR: validation as kube-apiserver's servicecidr strategy has it (1.33).

spec.cidrs holds one range, or two of different families, each a CIDR in strict canonical form
(apimachinery's IsValidCIDR: no leading zeros, no IPv4-mapped IPv6, no bits past the prefix) and
immutable once created. Status is the controllers' (a `Ready` condition): a create drops it, a main
update keeps the stored one. The finalizer and the deletion checks of kube-controller-manager's
servicecidrs controller (no Service may be left with an address only this range holds) are not modelled.
"""

from __future__ import annotations

import ipaddress
import re

from kubelab import validation
from kubelab.models import ServiceCIDR, TypedObject
from kubelab.validation import FieldError, GoLiteral, invalid, required

from .strategy import Strategy

_DIGITS = re.compile(r"[0-9]+")
_VALID = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"
_DUAL = "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64"


def _sloppy_network(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    """netutils.ParseCIDRSloppy, masked: IPv4 octets and the prefix may carry leading zeros."""
    addr, sep, bits = text.partition("/")
    if not sep or not _DIGITS.fullmatch(bits) or "%" in addr:
        return None
    try:
        if ":" in addr:
            ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.IPv6Address(addr)
        else:
            octets = addr.split(".")
            if len(octets) != 4 or not all(_DIGITS.fullmatch(o) and int(o) < 256 for o in octets):
                return None
            ip = ipaddress.IPv4Address(".".join(str(int(o)) for o in octets))
        return ipaddress.ip_network(f"{ip}/{int(bits)}", strict=False)
    except ValueError:
        return None


def cidr_errors(field: str, value: str) -> list[FieldError]:
    """apimachinery's IsValidCIDR (strict, for new fields), in its order and words."""
    net = _sloppy_network(value)
    if net is None:
        return [invalid(field, value, _VALID)]
    addr, _, bits = value.partition("/")
    leading_zero = (len(bits) > 1 and bits[0] == "0") or (
        ":" not in addr and any(len(o) > 1 and o[0] == "0" for o in addr.split(".")))
    if leading_zero:
        return [invalid(field, value, "must not have leading 0s in IP or prefix length")]
    if ":" in addr and ipaddress.IPv6Address(addr).ipv4_mapped is not None:
        return [invalid(field, value, "must not have an IPv4-mapped IPv6 address")]
    if ipaddress.ip_address(addr) != net.network_address:
        return [invalid(field, value, "must not have bits set beyond the prefix length")]
    if value != str(net):
        return [invalid(field, value, f"must be in canonical form ({validation.go_quote(str(net))})")]
    return []


def _spec_literal(cidrs: list[str]) -> GoLiteral:
    """The spec as field.Invalid prints it (%#v of networking.ServiceCIDRSpec)."""
    return GoLiteral("networking.ServiceCIDRSpec{CIDRs:[]string{" + ", ".join(validation.go_quote(c) for c in cidrs)
                     + "}}")


class ServiceCIDRStrategy(Strategy):
    def prepare_create(self, obj: TypedObject) -> None:
        super().prepare_create(obj)
        assert isinstance(obj, ServiceCIDR)
        obj.status = None  # serviceCIDRStrategy.PrepareForCreate

    def validate_create(self, obj: TypedObject) -> list[FieldError]:
        assert isinstance(obj, ServiceCIDR)
        return self.validate_meta(obj) + validate_cidrs(obj)

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        assert isinstance(new, ServiceCIDR) and isinstance(old, ServiceCIDR)
        errs = self.validate_meta_update(new, old)
        if subresource == "status":
            return errs  # ValidateServiceCIDRStatusUpdate: the metadata only
        new_cidrs = (new.spec.cidrs if new.spec else None) or []
        old_cidrs = (old.spec.cidrs if old.spec else None) or []
        if new_cidrs != old_cidrs:
            errs.append(invalid("spec.cidrs", new_cidrs, "field is immutable"))
        return errs


def validate_cidrs(obj: ServiceCIDR) -> list[FieldError]:
    """ValidateServiceCIDR past the metadata."""
    cidrs = (obj.spec.cidrs if obj.spec else None) or []
    if not cidrs:
        return [required("spec.cidrs", "at least one CIDR required")]
    if len(cidrs) > 2:
        return [invalid("spec.cidrs", _spec_literal(cidrs), "may only hold up to 2 values")]
    if len(cidrs) == 2:
        nets = [_sloppy_network(c) for c in cidrs]
        if None in nets or len({n.version for n in nets if n is not None}) != 2:
            return [invalid("spec.cidrs", _spec_literal(cidrs), _DUAL)]
    return [e for i, cidr in enumerate(cidrs) for e in cidr_errors(f"spec.cidrs[{i}]", cidr)]
