"""The ReplicationController manager: the ReplicaSet controller, run on ReplicationControllers.

kube's pkg/controller/replication does exactly this: it wraps the ReplicaSet controller and converts each
ReplicationController to a ReplicaSet (its selector map becomes matchLabels) on the way in, and the
ReplicaSet's status back on the way out. Here the conversion is `as_replicaset` / `as_replicationcontroller`
and the view of the informer that applies it; every decision (adoption, slow-start creation, which pods go
first, status, expectations) is the ReplicaSet controller's own.
"""

from __future__ import annotations

from typing import Any

from kubelab import kinds
from kubelab.client import ApiClient, Informer
from kubelab.client.informer import Handler
from kubelab.models import (
    LabelSelector,
    ReplicaSet,
    ReplicaSetSpec,
    ReplicaSetStatus,
    ReplicationController,
    ReplicationControllerSpec,
    ReplicationControllerStatus,
)

from .informers import SharedInformers
from .replicaset import ReplicaSetController


def as_replicaset(rc: ReplicationController) -> ReplicaSet:
    """The ReplicaSet the controller reasons about; it keeps the RC's apiVersion and kind, so the
    ownerReferences and events it makes name the ReplicationController."""
    spec = rc.spec
    rs_spec = None
    if spec is not None:
        rs_spec = ReplicaSetSpec(replicas=spec.replicas, min_ready_seconds=spec.min_ready_seconds,
                                 selector=LabelSelector(match_labels=dict(spec.selector or {})),
                                 template=spec.template)
    status = ReplicaSetStatus.model_validate(rc.status.to_dict()) if rc.status is not None else None
    return ReplicaSet(api_version=rc.api_version or "v1", kind=rc.kind or "ReplicationController",
                      metadata=rc.metadata, spec=rs_spec, status=status)


def as_replicationcontroller(rs: ReplicaSet) -> ReplicationController:
    spec = rs.spec
    rc_spec = None
    if spec is not None:
        labels = spec.selector.match_labels if spec.selector else None
        rc_spec = ReplicationControllerSpec(replicas=spec.replicas, min_ready_seconds=spec.min_ready_seconds,
                                            selector=dict(labels) if labels is not None else None,
                                            template=spec.template)
    status = ReplicationControllerStatus.model_validate(rs.status.to_dict()) if rs.status is not None else None
    return ReplicationController(api_version="v1", kind="ReplicationController", metadata=rs.metadata,
                                 spec=rc_spec, status=status)


class ReplicaSetView:
    """The ReplicationController informer as the ReplicaSet controller reads it."""

    def __init__(self, informer: Informer[ReplicationController]) -> None:
        self.informer = informer

    def get(self, key: str) -> ReplicaSet | None:
        rc = self.informer.get(key)
        return as_replicaset(rc) if rc is not None else None

    def items(self) -> list[ReplicaSet]:
        return [as_replicaset(rc) for rc in self.informer.items()]

    def add_handler(self, handler: Handler) -> None:
        def converted(event: str, old: ReplicationController | None, new: ReplicationController | None) -> None:
            handler(event, as_replicaset(old) if old is not None else None,
                    as_replicaset(new) if new is not None else None)

        self.informer.add_handler(converted)


class ReplicationManager(ReplicaSetController):
    name = "replicationcontroller-controller"
    rt = kinds.REPLICATIONCONTROLLERS
    kind = "ReplicationController"

    def __init__(self, api: ApiClient, informers: SharedInformers) -> None:
        super().__init__(api, informers, owners=ReplicaSetView(informers.replicationcontrollers))

    def stored(self, rs: ReplicaSet) -> Any:
        return as_replicationcontroller(rs)

    def viewed(self, obj: Any) -> ReplicaSet:
        assert isinstance(obj, ReplicationController)
        return as_replicaset(obj)
