"""metadata.managedFields and server-side apply.

This package owns the field-ownership bookkeeping kube-apiserver's field manager does: which manager
set which fields (`fieldpath`: paths, field sets, FieldsV1), how an update moves ownership and how an
apply merges, prunes and detects conflicts (`manager`). It works on plain JSON dicts; the registry
decides when to call it and stores the result.
"""

from kubelab.kinds import ResourceType

from .fieldpath import custom_type_name, merge, register_schema, unregister_schema
from .manager import (
    APPLY,
    LAST_APPLIED,
    UPDATE,
    ApplyConflict,
    Conflict,
    Entry,
    apply,
    decode_entries,
    encode_entries,
    track_update,
)


def type_name(rt: ResourceType) -> str:
    """What the field rules of `rt` are found by: the kind of a built-in, the version and kind of a custom
    kind (each served version of a definition has its own schema, registered with register_schema)."""
    return custom_type_name(rt.api_version, rt.kind) if rt.storage_name else rt.kind


__all__ = ["APPLY", "LAST_APPLIED", "UPDATE", "ApplyConflict", "Conflict", "Entry", "apply", "custom_type_name",
           "decode_entries", "encode_entries", "merge", "register_schema", "track_update", "type_name",
           "unregister_schema"]
