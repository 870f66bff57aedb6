"""Endpoints and EndpointSlices: written by controllers, validated as kube-apiserver does."""

from __future__ import annotations

import ipaddress

from kubelab import validation
from kubelab.models import EndpointSlice, Endpoints, TypedObject
from kubelab.validation import FieldError, invalid, not_supported, required

from .strategy import Strategy

ADDRESS_TYPES = ["FQDN", "IPv4", "IPv6"]


def _ip_errors(ip: str | None, path: str) -> list[FieldError]:
    if not ip:
        return [required(path)]
    try:
        ipaddress.ip_address(ip)
    except ValueError:
        return [invalid(path, ip, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)")]
    return []


class EndpointsStrategy(Strategy):
    has_status = False

    def validate_create(self, obj: TypedObject) -> list[FieldError]:
        assert isinstance(obj, Endpoints)
        errs = self.validate_meta(obj)
        for i, subset in enumerate(obj.subsets or []):
            for group in ("addresses", "not_ready_addresses"):
                wire = "addresses" if group == "addresses" else "notReadyAddresses"
                for j, addr in enumerate(getattr(subset, group) or []):
                    errs += _ip_errors(addr.ip, f"subsets[{i}].{wire}[{j}].ip")
            for j, port in enumerate(subset.ports or []):
                if port.port is None:
                    errs.append(required(f"subsets[{i}].ports[{j}].port"))
                else:
                    errs += [invalid(f"subsets[{i}].ports[{j}].port", port.port, p)
                             for p in validation.port_number_errors(port.port)]
        return errs

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        return self.validate_create(new) + [e for e in super().validate_update(new, old, subresource)
                                            if e.field == "metadata.name" and e.detail == "field is immutable"]


class EndpointSliceStrategy(Strategy):
    has_status = False

    def prepare_create(self, obj: TypedObject) -> None:
        super().prepare_create(obj)
        obj.metadata.generation = 1

    def prepare_update(self, new: TypedObject, old: TypedObject, subresource: str | None) -> None:
        super().prepare_update(new, old, subresource)
        new.metadata.generation = (old.metadata.generation or 1) + (0 if new.to_dict() == old.to_dict() else 1)

    def validate_create(self, obj: TypedObject) -> list[FieldError]:
        assert isinstance(obj, EndpointSlice)
        errs = self.validate_meta(obj)
        if not obj.address_type:
            errs.append(required("addressType"))
        elif obj.address_type not in ADDRESS_TYPES:
            errs.append(not_supported("addressType", obj.address_type, ADDRESS_TYPES))
        if len(obj.endpoints or []) > 1000:
            errs.append(FieldError("TooMany", "endpoints", len(obj.endpoints or []), "must have at most 1000 items"))
        for i, ep in enumerate(obj.endpoints or []):
            if not ep.addresses:
                errs.append(required(f"endpoints[{i}].addresses"))
            elif obj.address_type in ("IPv4", "IPv6"):
                for j, addr in enumerate(ep.addresses):
                    errs += _ip_errors(addr, f"endpoints[{i}].addresses[{j}]")
        for i, port in enumerate(obj.ports or []):
            if port.port is not None:
                errs += [invalid(f"ports[{i}].port", port.port, p) for p in validation.port_number_errors(port.port)]
        return errs

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        errs = self.validate_create(new)
        if isinstance(new, EndpointSlice) and isinstance(old, EndpointSlice) and new.address_type != old.address_type:
            errs.append(invalid("addressType", new.address_type, "field is immutable"))
        return errs
