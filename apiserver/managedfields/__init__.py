"""metadata.managedFields and server-side apply.

This package owns the field-ownership bookkeeping kube-apiserver's field manager does: which manager
set which fields (`fieldpath`: paths, field sets, FieldsV1), how an update moves ownership and how an
apply merges, prunes and detects conflicts (`manager`). It works on plain JSON dicts; the registry
decides when to call it and stores the result.
"""

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

__all__ = ["APPLY", "LAST_APPLIED", "UPDATE", "ApplyConflict", "Conflict", "Entry", "apply", "decode_entries",
           "encode_entries", "track_update"]
