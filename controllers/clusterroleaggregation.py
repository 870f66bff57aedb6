"""The clusterrole-aggregation controller: keeps every aggregated ClusterRole's rules (admin, edit, view,
and any a user writes with an aggregationRule) the union of the rules of the ClusterRoles its selectors
pick (kubelab/rbacaggregation.py decides), as kube-controller-manager's does. Any ClusterRole change
requeues every aggregated one; a write is an update with the role's resourceVersion (a compare-and-swap:
a conflict requeues)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from kubelab import kinds
from kubelab.client import ApiClient, ApiError, Informer, NotFound, WorkQueue
from kubelab.models import ClusterRole
from kubelab.rbacaggregation import aggregated_rules

from .queuecontroller import QueueController

log = logging.getLogger(__name__)


class ClusterRoleAggregationController(QueueController):
    name = "clusterrole-aggregation-controller"
    max_workers = 1

    def __init__(self, api: ApiClient, roles: Informer[ClusterRole]) -> None:
        self.api = api
        self.roles = roles
        self.queue = WorkQueue(self.name)
        roles.add_handler(self._on_role)

    def _on_role(self, event: str, old: ClusterRole | None, new: ClusterRole | None) -> None:
        for key in self.initial_keys():
            self.queue.add(key)

    def caches(self) -> Sequence[Informer[Any]]:
        return (self.roles,)

    def initial_keys(self) -> Iterable[str]:
        """Every aggregated ClusterRole (any role's change may change what they gather)."""
        return [role.metadata.name or "" for role in self.roles.items() if role.aggregation_rule is not None]

    async def reconcile(self, name: str) -> None:
        role = self.roles.get(name)
        if role is None:
            return
        wanted = aggregated_rules(role.to_dict(), [r.to_dict() for r in self.roles.items()])
        if wanted is None or wanted == role.to_dict().get("rules", []):
            return
        updated = role.to_dict()
        updated["rules"] = wanted
        try:
            await self.api.update(kinds.CLUSTERROLES, ClusterRole.from_dict(updated))
            log.info("%s: %s now aggregates %d rules", self.name, name, len(wanted))
        except NotFound:
            pass
        except ApiError as exc:
            if exc.code != 409:
                raise
            self.queue.add(name)  # written meanwhile: the watch brings the new version


