"""Secrets and ServiceAccounts: defaults and validation as kube-apiserver's core registry has them.

A Secret's `stringData` is write-only: the conversion from v1 merges it into `data` (base64, as the
wire carries bytes) and it is never stored or returned. Keys follow the ConfigMap key rule; the total
size is bounded at 1 MiB; `type` cannot change, nor can the data of an `immutable` Secret.
"""

from __future__ import annotations

import base64

from kubelab.models import Secret, ServiceAccount, TypedObject
from kubelab.validation import FieldError, config_map_key_errors, forbidden, invalid, required

from .decoding import canonical_bytes
from .strategy import Strategy

MAX_SECRET_SIZE = 1024 * 1024
# Keys a typed Secret must carry (ValidateSecret).
REQUIRED_KEYS: dict[str, tuple[str, ...]] = {
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
    "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
    "kubernetes.io/dockercfg": (".dockercfg",),
    "kubernetes.io/ssh-auth": ("ssh-privatekey",),
}


class SecretStrategy(Strategy):
    has_status = False

    def set_defaults(self, obj: TypedObject) -> None:
        assert isinstance(obj, Secret)
        obj.type = obj.type or "Opaque"
        if obj.data:
            # data is map[string][]byte: decoded as Go's base64 does (a YAML `|` block's line breaks are
            # skipped) and returned canonical; what does not decode is kube's decode error, verbatim.
            obj.data = canonical_bytes(obj.data, "Secret")
        if obj.string_data:
            data = dict(obj.data or {})
            data.update({k: base64.b64encode(v.encode()).decode() for k, v in obj.string_data.items()})
            obj.data, obj.string_data = data, None

    def validate_create(self, obj: TypedObject) -> list[FieldError]:
        assert isinstance(obj, Secret)
        errs = self.validate_meta(obj)
        data = obj.data or {}
        total = 0
        for key, value in data.items():
            errs += [invalid(f"data[{key}]", key, p) for p in config_map_key_errors(key)]
            total += len(value) * 3 // 4
        if total > MAX_SECRET_SIZE:
            errs.append(FieldError("TooLong", "data", None, f"must have at most {MAX_SECRET_SIZE} bytes"))
        for key in REQUIRED_KEYS.get(obj.type or "", ()):
            if key not in data:
                errs.append(required(f"data[{key}]"))
        return errs

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        assert isinstance(new, Secret) and isinstance(old, Secret)
        errs = self.validate_create(new)
        if new.metadata.name != old.metadata.name:
            errs.append(invalid("metadata.name", new.metadata.name, "field is immutable"))
        if new.type != old.type:
            errs.append(invalid("type", new.type, "field is immutable"))
        if old.immutable:
            if new.data != old.data:
                errs.append(forbidden("data", "field is immutable when `immutable` is set"))
            if not new.immutable:
                errs.append(forbidden("immutable", "field is immutable when `immutable` is set"))
        return errs


class ServiceAccountStrategy(Strategy):
    has_status = False

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        assert isinstance(new, ServiceAccount)
        return super().validate_update(new, old, subresource)
