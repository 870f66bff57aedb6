"""The Deployment controller: roll a pod template out through ReplicaSets (kube's pkg/controller/deployment).

One sync per Deployment key: claim the ReplicaSets its selector matches, find or create the new RS
(`<deployment>-<pod-template-hash>`), then do one step — a resize spread proportionally over the
RSs, a RollingUpdate scale-up or scale-down within maxSurge/maxUnavailable, or Recreate's "all old
gone, then all new" — and write the status with kube's conditions. Old RSs past
revisionHistoryLimit are deleted once a rollout is complete. The arithmetic lives in `rollout.py`;
this module reads the informers' caches and writes the differences.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from kubelab import kinds, timeutil
from kubelab.client import AlreadyExists, ApiClient, ApiError, NotFound, WorkQueue
from kubelab.events import EventRecorder
from kubelab.models import Deployment, DeploymentStatus, ObjectMeta, Pod, ReplicaSet, ReplicaSetSpec
from kubelab.selectors import SelectorError, selector_from_label_selector

from . import rollout
from .informers import SharedInformers
from .ownership import claim_all, controller_ref, new_controller_ref
from .queuecontroller import QueueController

log = logging.getLogger(__name__)


class DeploymentController(QueueController):
    name = "deployment-controller"

    def __init__(self, api: ApiClient, informers: SharedInformers) -> None:
        self.api = api
        self.deployments = informers.deployments
        self.replicasets = informers.replicasets
        self.informers = informers
        self.queue = WorkQueue(self.name)
        self.events = EventRecorder(api, self.name)
        self.deployments.add_handler(lambda e, old, new: self.queue.add((new or old).key))
        self.replicasets.add_handler(self._on_replicaset)
        informers.pods.add_handler(self._on_pod)

    def initial_keys(self) -> Iterable[str]:
        return [d.key for d in self.deployments.items()]

    # --- event handlers ------------------------------------------------------------------------

    def _owner_key(self, obj: Any) -> str | None:
        ref = controller_ref(obj)
        if ref is None or ref.kind != "Deployment":
            return None
        key = f"{obj.metadata.namespace}/{ref.name}"
        d = self.deployments.get(key)
        return key if d is not None and d.metadata.uid == ref.uid else None

    def _selecting(self, rs: ReplicaSet) -> list[str]:
        keys = []
        for d in self.deployments.items():
            if d.metadata.namespace != rs.metadata.namespace or not d.spec:
                continue
            try:
                if selector_from_label_selector(d.spec.selector).matches(rs.metadata.labels):
                    keys.append(d.key)
            except SelectorError:
                continue
        return keys

    def _on_replicaset(self, event: str, old: ReplicaSet | None, new: ReplicaSet | None) -> None:
        keys: set[str] = set()
        for rs in (old, new):
            if rs is None:
                continue
            owner = self._owner_key(rs)
            if owner is not None:
                keys.add(owner)
            elif controller_ref(rs) is None and rs is new:
                keys.update(self._selecting(rs))  # an orphan a Deployment may adopt
        for key in keys:
            self.queue.add(key)

    def _on_pod(self, event: str, old: Pod | None, new: Pod | None) -> None:
        # Recreate waits for the old pods to be gone (kube's deletePod handler).
        if new is not None or old is None:
            return
        ref = controller_ref(old)
        if ref is None or ref.kind != "ReplicaSet":
            return
        rs = self.replicasets.get(f"{old.metadata.namespace}/{ref.name}")
        key = self._owner_key(rs) if rs is not None else None
        if key is not None:
            self.queue.add(key)

    # --- sync ----------------------------------------------------------------------------------

    async def reconcile(self, key: str) -> None:
        cached = self.deployments.get(key)
        if cached is None:
            return
        d = cached.model_copy(deep=True)
        selector_spec = d.spec.selector if d.spec else None
        if selector_spec is None or not (selector_spec.match_labels or selector_spec.match_expressions):
            self.events.event(d, "Warning", "SelectingAll",
                              "This deployment is selecting all pods. A non-empty selector is required.")
            return
        sync = _Sync(self, d, await self._claim_replicasets(d))
        await sync.run()
        if sync.requeue_after is not None:
            self.queue.add_after(key, sync.requeue_after)

    async def _claim_replicasets(self, d: Deployment) -> list[ReplicaSet]:
        selector = selector_from_label_selector(d.spec.selector if d.spec else None)
        candidates = (rs for rs in self.replicasets.items() if rs.metadata.namespace == d.metadata.namespace)
        return await claim_all(self.api, d, kinds.DEPLOYMENTS, candidates, kinds.REPLICASETS,
                               lambda rs: selector.matches(rs.metadata.labels), what="replica sets")

    def pods_by_rs(self, d: Deployment, rss: list[ReplicaSet]) -> dict[str, list[Pod]]:
        """getPodMapForDeployment: the pods each of `rss` controls, by RS UID."""
        uids = {rs.metadata.uid or "" for rs in rss}
        result: dict[str, list[Pod]] = {uid: [] for uid in uids}
        for pod in self.informers.pods_in(d.metadata.namespace or ""):
            ref = controller_ref(pod)
            if ref is not None and ref.uid in uids:
                result[ref.uid or ""].append(pod)
        return result


class _Sync:
    """One syncDeployment. It keeps its own copies of the Deployment and its RSs, replaced by what each
    write returns, so later steps of the same sync never write from a stale resourceVersion."""

    def __init__(self, controller: DeploymentController, d: Deployment, rss: list[ReplicaSet]) -> None:
        self.c = controller
        self.api = controller.api
        self.d = d
        self.rss = rss
        self.requeue_after: float | None = None

    @property
    def key(self) -> str:
        return self.d.key

    async def run(self) -> None:
        d = self.d
        if d.metadata.deletion_timestamp:
            new_rs, old_rss = await self.new_and_old(create=False)
            await self.sync_status([*old_rss, new_rs], new_rs)
            return
        await self.check_paused_conditions()
        if d.spec and d.spec.paused:
            await self.sync_scale()
            return
        if await self.is_scaling_event():
            await self.sync_scale()
            return
        strategy = (d.spec.strategy.type if d.spec and d.spec.strategy else None) or "RollingUpdate"
        if strategy == "Recreate":
            await self.rollout_recreate()
        else:
            await self.rollout_rolling()

    # --- finding the new RS ------------------------------------------------------------------

    def _replace(self, rs: ReplicaSet) -> ReplicaSet:
        self.rss = [rs if other.metadata.uid == rs.metadata.uid else other for other in self.rss]
        if all(other.metadata.uid != rs.metadata.uid for other in self.rss):
            self.rss.append(rs)
        return rs

    async def new_and_old(self, *, create: bool) -> tuple[ReplicaSet | None, list[ReplicaSet]]:
        """getAllReplicaSetsAndSyncRevision."""
        existing = rollout.find_new(self.d, self.rss)
        old = [rs for rs in self.rss if existing is None or rs.metadata.uid != existing.metadata.uid]
        new_rs = await self.new_replicaset(existing, old, create=create)
        old = [rs for rs in self.rss if new_rs is None or rs.metadata.uid != new_rs.metadata.uid]
        return new_rs, old

    async def new_replicaset(self, existing: ReplicaSet | None, old: list[ReplicaSet], *, create: bool
                             ) -> ReplicaSet | None:
        d = self.d
        new_revision = str(rollout.max_revision(old) + 1)
        now = timeutil.now()
        if existing is not None:
            rs = existing.model_copy(deep=True)
            changed = rollout.set_new_rs_annotations(d, rs, new_revision, exists=True)
            min_ready = d.spec.min_ready_seconds if d.spec else None
            if changed or (rs.spec and rs.spec.min_ready_seconds != min_ready):
                assert rs.spec is not None
                rs.spec.min_ready_seconds = min_ready
                return self._replace(await self.api.update(kinds.REPLICASETS, rs))
            revision = (rs.metadata.annotations or {}).get(rollout.REVISION, "")
            await self.set_revision(revision)
            if rollout.has_progress_deadline(d) and rollout.condition_of(d.status, "Progressing") is None:
                status = (d.status or DeploymentStatus()).model_copy(deep=True)
                message = f'Found new replica set "{rs.metadata.name}"'
                rollout.set_condition(status, rollout.new_condition(
                    "Progressing", "True", rollout.FOUND_NEW_RS_REASON, message, now))
                await self.update_status(status)
            return rs
        if not create:
            return None
        return await self.create_replicaset(old, new_revision)

    async def create_replicaset(self, old: list[ReplicaSet], new_revision: str) -> ReplicaSet | None:
        d = self.d
        assert d.spec is not None and d.spec.template is not None and d.spec.selector is not None
        collision = d.status.collision_count if d.status else None
        template_hash = rollout.compute_hash(d.spec.template, collision)
        template = d.spec.template.model_copy(deep=True)
        template.metadata = template.metadata or ObjectMeta()
        template.metadata.labels = {**(template.metadata.labels or {}), rollout.HASH_LABEL: template_hash}
        selector = d.spec.selector.model_copy(deep=True)
        selector.match_labels = {**(selector.match_labels or {}), rollout.HASH_LABEL: template_hash}
        rs = ReplicaSet(api_version="apps/v1", kind="ReplicaSet",
                        metadata=ObjectMeta(name=f"{d.metadata.name}-{template_hash}",
                                            namespace=d.metadata.namespace,
                                            labels=dict(template.metadata.labels),
                                            owner_references=[new_controller_ref(d)]),
                        spec=ReplicaSetSpec(replicas=0, min_ready_seconds=d.spec.min_ready_seconds,
                                            selector=selector, template=template))
        replicas = rollout.new_rs_new_replicas(d, [*old, rs], rs)
        assert rs.spec is not None
        rs.spec.replicas = replicas
        rollout.set_new_rs_annotations(d, rs, new_revision, exists=False)
        now = timeutil.now()
        already_exists = False
        try:
            created: ReplicaSet = await self.api.create(kinds.REPLICASETS, rs, d.metadata.namespace)
        except AlreadyExists:
            found: ReplicaSet = await self.api.get(kinds.REPLICASETS, rs.metadata.name or "",
                                                   d.metadata.namespace)
            ref = controller_ref(found)
            if ref is not None and ref.uid == d.metadata.uid and rollout.equal_ignore_hash(
                    found.spec.template if found.spec else None, d.spec.template):
                created, already_exists = found, True
            else:
                # A hash collision: count it, so the next hash differs, and try again.
                status = (d.status or DeploymentStatus()).model_copy(deep=True)
                status.collision_count = (status.collision_count or 0) + 1
                await self.update_status(status)
                raise RuntimeError(f"found a hash collision for deployment {d.metadata.name!r}; bumping "
                                   f"collision count to {status.collision_count}") from None
        except ApiError as exc:
            message = f'Failed to create new replica set "{rs.metadata.name}": {exc.message}'
            if rollout.has_progress_deadline(d):
                status = (d.status or DeploymentStatus()).model_copy(deep=True)
                rollout.set_condition(status, rollout.new_condition(
                    "Progressing", "False", rollout.FAILED_RS_CREATE_REASON, message, now))
                await self.update_status(status)
            raise
        if not already_exists and replicas > 0:
            self.c.events.event(d, "Normal", "ScalingReplicaSet",
                                f"Scaled up replica set {created.metadata.name} to {replicas}")
        self._replace(created)
        await self.set_revision(new_revision)
        if not already_exists and rollout.has_progress_deadline(d):
            status = (d.status or DeploymentStatus()).model_copy(deep=True)
            message = f'Created new replica set "{created.metadata.name}"'
            rollout.set_condition(status, rollout.new_condition("Progressing", "True", rollout.NEW_RS_REASON,
                                                                message, now))
            await self.update_status(status)
        return created

    # --- writes ----------------------------------------------------------------------------------

    async def set_revision(self, revision: str) -> None:
        """SetDeploymentRevision. kube writes it with the status (its Deployment status strategy keeps
        annotation changes); kubelab's status subresource changes status only, so it is a metadata patch."""
        if not revision or (self.d.metadata.annotations or {}).get(rollout.REVISION) == revision:
            return
        patch = {"metadata": {"annotations": {rollout.REVISION: revision},
                              "resourceVersion": self.d.metadata.resource_version}}
        self.d = await self.api.patch(kinds.DEPLOYMENTS, self.d.metadata.name or "", patch,
                                      self.d.metadata.namespace)

    async def update_status(self, status: DeploymentStatus) -> None:
        updated = self.d.model_copy(update={"status": status})
        self.d = await self.api.update_status(kinds.DEPLOYMENTS, updated)

    async def scale(self, rs: ReplicaSet, size: int, operation: str | None = None) -> tuple[bool, ReplicaSet]:
        """scaleReplicaSet: new size and the replicas annotations in one update; the event on a resize."""
        d = self.d
        old_size = rollout.spec_replicas(rs)
        surge = rollout.max_surge(d)
        needs_annotations = rollout.replicas_annotations_need_update(rs, rollout.replicas_of(d),
                                                                     rollout.replicas_of(d) + surge)
        if old_size == size and not needs_annotations:
            return False, rs
        copy = rs.model_copy(deep=True)
        assert copy.spec is not None
        copy.spec.replicas = size
        rollout.set_replicas_annotations(copy, rollout.replicas_of(d), rollout.replicas_of(d) + surge)
        updated = self._replace(await self.api.update(kinds.REPLICASETS, copy))
        if old_size != size:
            operation = operation or ("up" if size > old_size else "down")
            message = f"Scaled {operation} replica set {rs.metadata.name} to {size} from {old_size}"
            self.c.events.event(d, "Normal", "ScalingReplicaSet", message)
            log.info("deployment %s: %s", self.key, message[:1].lower() + message[1:])
        return old_size != size, updated

    # --- status ----------------------------------------------------------------------------------

    async def sync_status(self, all_rss: list[ReplicaSet | None], new_rs: ReplicaSet | None) -> None:
        """syncDeploymentStatus: counts and Available, Progressing untouched."""
        status = rollout.calculate_status(all_rss, new_rs, self.d, timeutil.now())
        if not rollout.same_status(self.d.status, status):
            await self.update_status(status)

    async def sync_rollout_status(self, all_rss: list[ReplicaSet | None], new_rs: ReplicaSet | None) -> None:
        now = timeutil.now()
        status = rollout.rollout_status(self.d, all_rss, new_rs, now)
        if rollout.same_status(self.d.status, status):
            self._requeue_stuck(status, now)
            return
        await self.update_status(status)

    def _requeue_stuck(self, status: DeploymentStatus, now: Any) -> None:
        """requeueStuckDeployment: look again when the progress deadline would pass."""
        d = self.d
        cond = rollout.condition_of(status, "Progressing")
        if cond is None or not rollout.has_progress_deadline(d) or cond.reason in (
                rollout.NEW_RS_AVAILABLE_REASON, rollout.TIMED_OUT_REASON) or rollout.is_complete(d, status):
            return
        since = timeutil.parse(cond.last_update_time)
        if since is None or d.spec is None or d.spec.progress_deadline_seconds is None:
            return
        remaining = (since - now).total_seconds() + d.spec.progress_deadline_seconds
        self.requeue_after = max(remaining, 0) + 1

    async def check_paused_conditions(self) -> None:
        d = self.d
        if not rollout.has_progress_deadline(d):
            return
        cond = rollout.condition_of(d.status, "Progressing")
        if cond is not None and cond.reason == rollout.TIMED_OUT_REASON:
            return
        paused_exists = cond is not None and cond.reason == rollout.PAUSED_REASON
        paused = bool(d.spec and d.spec.paused)
        if paused == paused_exists:
            return
        status = (d.status or DeploymentStatus()).model_copy(deep=True)
        reason, message = ((rollout.PAUSED_REASON, "Deployment is paused") if paused
                           else (rollout.RESUMED_REASON, "Deployment is resumed"))
        rollout.set_condition(status, rollout.new_condition("Progressing", "Unknown", reason, message,
                                                            timeutil.now()))
        await self.update_status(status)

    # --- strategies ----------------------------------------------------------------------------

    async def is_scaling_event(self) -> bool:
        new_rs, old_rss = await self.new_and_old(create=False)
        for rs in rollout.active([*old_rss, new_rs]):
            desired = rollout.desired_annotation(rs)
            if desired is not None and desired != rollout.replicas_of(self.d):
                return True
        return False

    async def sync_scale(self) -> None:
        """sync(): a resize (or a paused Deployment): proportional scaling, cleanup while paused, status."""
        new_rs, old_rss = await self.new_and_old(create=False)
        await self.proportional_scale(new_rs, old_rss)
        new_rs, old_rss = self._refreshed(new_rs, old_rss)
        if self.d.spec and self.d.spec.paused:
            await self.cleanup(old_rss)
        await self.sync_status([*old_rss, new_rs], new_rs)

    def _refreshed(self, new_rs: ReplicaSet | None, old_rss: list[ReplicaSet]
                   ) -> tuple[ReplicaSet | None, list[ReplicaSet]]:
        by_uid = {rs.metadata.uid: rs for rs in self.rss}
        fresh_new = by_uid.get(new_rs.metadata.uid, new_rs) if new_rs is not None else None
        return fresh_new, [by_uid.get(rs.metadata.uid, rs) for rs in old_rss]

    async def proportional_scale(self, new_rs: ReplicaSet | None, old_rss: list[ReplicaSet]) -> None:
        d = self.d
        target = rollout.find_active_or_latest(new_rs, old_rss)
        if target is not None:
            if rollout.spec_replicas(target) != rollout.replicas_of(d):
                await self.scale(target, rollout.replicas_of(d))
            return
        if rollout.is_saturated(d, new_rs):
            for old in rollout.active(old_rss):
                await self.scale(old, 0)
            return
        if (d.spec and d.spec.strategy and d.spec.strategy.type == "Recreate"):
            return
        sizes, operation = rollout.proportional_sizes(d, [*old_rss, *([new_rs] if new_rs else [])])
        for rs, size in sizes:
            await self.scale(rs, size, operation or None)

    async def rollout_rolling(self) -> None:
        new_rs, old_rss = await self.new_and_old(create=True)
        assert new_rs is not None
        d = self.d
        # Scale up, if we can.
        if rollout.spec_replicas(new_rs) != rollout.replicas_of(d):
            if rollout.spec_replicas(new_rs) > rollout.replicas_of(d):
                target = rollout.replicas_of(d)
            else:
                target = rollout.new_rs_new_replicas(d, [*old_rss, new_rs], new_rs)
            scaled, new_rs = await self.scale(new_rs, target)
            if scaled:
                await self.sync_rollout_status([*old_rss, new_rs], new_rs)
                return
        # Scale down, if we can.
        if await self.reconcile_old(new_rs, old_rss):
            new_rs, old_rss = self._refreshed(new_rs, old_rss)
            await self.sync_rollout_status([*old_rss, new_rs], new_rs)
            return
        if rollout.is_complete(d, d.status or DeploymentStatus()):
            await self.cleanup(old_rss)
        new_rs, old_rss = self._refreshed(new_rs, old_rss)
        await self.sync_rollout_status([*old_rss, new_rs], new_rs)

    async def reconcile_old(self, new_rs: ReplicaSet, old_rss: list[ReplicaSet]) -> bool:
        d = self.d
        if rollout.total_spec(old_rss) == 0:
            return False
        all_rss: list[ReplicaSet | None] = [*old_rss, new_rs]
        budget = rollout.max_scaled_down(d, all_rss, new_rs)
        if budget <= 0:
            return False
        total = 0
        for rs, size in rollout.cleanup_unhealthy(rollout.active(old_rss), budget):
            total += rollout.spec_replicas(rs) - size
            await self.scale(rs, size)
        fresh_new, old_rss = self._refreshed(new_rs, old_rss)
        for rs, size in rollout.scale_down_old(d, [*old_rss, fresh_new], rollout.active(old_rss)):
            total += rollout.spec_replicas(rs) - size
            await self.scale(rs, size)
        return total > 0

    async def rollout_recreate(self) -> None:
        new_rs, old_rss = await self.new_and_old(create=False)
        scaled_down = False
        for rs in rollout.active(old_rss):
            scaled, _ = await self.scale(rs, 0)
            scaled_down = scaled_down or scaled
        new_rs, old_rss = self._refreshed(new_rs, old_rss)
        if scaled_down:
            await self.sync_rollout_status([*old_rss, new_rs], new_rs)
            return
        if self._old_pods_running(new_rs, old_rss):
            await self.sync_rollout_status([*old_rss, new_rs], new_rs)
            return
        if new_rs is None:
            new_rs, old_rss = await self.new_and_old(create=True)
        assert new_rs is not None
        if rollout.spec_replicas(new_rs) != rollout.replicas_of(self.d):
            _, new_rs = await self.scale(new_rs, rollout.replicas_of(self.d))
        if rollout.is_complete(self.d, self.d.status or DeploymentStatus()):
            await self.cleanup(old_rss)
        new_rs, old_rss = self._refreshed(new_rs, old_rss)
        await self.sync_rollout_status([*old_rss, new_rs], new_rs)

    def _old_pods_running(self, new_rs: ReplicaSet | None, old_rss: list[ReplicaSet]) -> bool:
        """oldPodsRunning: an old RS still reports replicas, or one of its pods has not finished."""
        if any((rs.status.replicas if rs.status else 0) for rs in old_rss):
            return True
        pods = self.c.pods_by_rs(self.d, self.rss)
        for rs in old_rss:
            for pod in pods.get(rs.metadata.uid or "", []):
                if pod.phase not in ("Succeeded", "Failed"):
                    return True
        return False

    async def cleanup(self, old_rss: list[ReplicaSet]) -> None:
        """cleanupDeployment: delete the oldest revisions past revisionHistoryLimit, if they are empty."""
        d = self.d
        limit = d.spec.revision_history_limit if d.spec else None
        if limit is None:
            return
        alive = [rs for rs in old_rss if not rs.metadata.deletion_timestamp]
        excess = len(alive) - limit
        if excess <= 0:
            return
        for rs in rollout.by_revision(alive)[:excess]:
            status = rs.status
            if ((status.replicas if status else 0) or rollout.spec_replicas(rs)
                    or (rs.metadata.generation or 0) > ((status.observed_generation if status else 0) or 0)):
                continue
            log.info("deployment %s: deleting old replica set %s (revision history limit %d)", self.key,
                     rs.metadata.name, limit)
            try:
                await self.api.delete(kinds.REPLICASETS, rs.metadata.name or "", rs.metadata.namespace)
            except NotFound:
                pass
