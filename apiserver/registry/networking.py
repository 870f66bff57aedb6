"""Endpoints and EndpointSlices: written by controllers, validated as kube-apiserver does."""

from __future__ import annotations

from kubelab import validation
from kubelab.models import Endpoints, EndpointSlice, TypedObject
from kubelab.validation import FieldError, invalid, not_supported, required

from .strategy import Strategy

ADDRESS_TYPES = ["FQDN", "IPv4", "IPv6"]
PROTOCOLS = ["SCTP", "TCP", "UDP"]


def _ip_errors(ip: str | None, path: str) -> list[FieldError]:
    if not ip:
        return [required(path)]
    try:
        validation.parse_ip(ip)
    except ValueError:
        return [invalid(path, ip, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)")]
    return []


def _label_errors(value: str | None, path: str) -> list[FieldError]:
    """ValidateDNS1123Label, for port names and hostnames (an empty port name is allowed)."""
    return [invalid(path, value, p) for p in validation.dns1123_label_errors(value)] if value else []


def _node_name_errors(value: str | None, path: str) -> list[FieldError]:
    """ValidateNodeName: a node name is a DNS subdomain."""
    return [invalid(path, value, p) for p in validation.dns1123_subdomain_errors(value)] if value is not None else []


def _port_errors(name: str | None, protocol: str | None, path: str, names: set[str] | None) -> list[FieldError]:
    """An Endpoints or EndpointSlice port's name and protocol, as validatePorts checks them (`names`: the
    names seen so far, for the slice's duplicate check). kube defaults a missing protocol to TCP; kubelab
    stores it missing, so only a protocol given is checked."""
    errs = _label_errors(name, f"{path}.name")
    if names is not None:
        if (name or "") in names:
            errs.append(validation.duplicate(f"{path}.name", name or ""))
        names.add(name or "")
    if protocol is not None and protocol not in PROTOCOLS:
        errs.append(not_supported(f"{path}.protocol", protocol, PROTOCOLS))
    return errs


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
                    errs += _label_errors(addr.hostname, f"subsets[{i}].{wire}[{j}].hostname")
                    errs += _node_name_errors(addr.node_name, f"subsets[{i}].{wire}[{j}].nodeName")
            for j, port in enumerate(subset.ports or []):
                if len(subset.ports or []) > 1 and not port.name:
                    errs.append(required(f"subsets[{i}].ports[{j}].name"))
                errs += _port_errors(port.name, port.protocol, f"subsets[{i}].ports[{j}]", None)
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
            errs += _node_name_errors(ep.node_name, f"endpoints[{i}].nodeName")
            errs += _label_errors(ep.hostname, f"endpoints[{i}].hostname")
        names: set[str] = set()
        for i, port in enumerate(obj.ports or []):
            errs += _port_errors(port.name, port.protocol, f"ports[{i}]", names)
            if port.port is not None:
                errs += [invalid(f"ports[{i}].port", port.port, p) for p in validation.port_number_errors(port.port)]
        return errs

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        errs = self.validate_create(new)
        if isinstance(new, EndpointSlice) and isinstance(old, EndpointSlice) and new.address_type != old.address_type:
            errs.append(invalid("addressType", new.address_type, "field is immutable"))
        return errs
