"""Writing a workload's status the way kube's DaemonSet and StatefulSet controllers do
(storeDaemonSetStatus, updateStatefulSetStatus): nothing when it is unchanged; on a 409 the object is read
again and the status written once more on the fresh copy, its observedGeneration taken from it; a deleted
object is let go."""

from __future__ import annotations

from typing import Any

from kubelab.client import ApiClient, Conflict, NotFound
from kubelab.kinds import ResourceType
from kubelab.models import TypedObject


async def write_status(api: ApiClient, rt: ResourceType, obj: TypedObject, status: Any) -> None:
    """`status` is the object's new status model (it has observed_generation)."""
    current = getattr(obj, "status", None)
    if current is not None and current.to_dict() == status.to_dict():
        return
    for attempt in range(2):
        try:
            await api.update_status(rt, obj.model_copy(update={"status": status}))
            return
        except NotFound:
            return
        except Conflict:
            if attempt:
                raise
            obj = await api.get(rt, obj.metadata.name or "", obj.metadata.namespace)
            status.observed_generation = obj.metadata.generation
