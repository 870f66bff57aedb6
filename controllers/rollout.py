"""The Deployment controller's arithmetic and bookkeeping, as pure functions (kube's deployment/util).

Everything here takes plain objects and returns values or edited copies: the pod-template-hash, the
surge/unavailable fenceposts, how far the new ReplicaSet may grow and the old ones shrink, the
proportional split of a resize, revisions and annotations, the status and its conditions. No clock
is read here: `now` is passed in. `deployment.py` does the I/O.

Worked example (3 replicas, 25%/25%): surge = ceil(0.75) = 1, unavailable = floor(0.75) = 0. With the
old RS at 3 available, the new RS may grow to 1 (4 pods in all); nothing may go until that pod is
available, then the old RS drops to 2 (3 pods, 3 available), and so on.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime, timedelta

import orjson

from kubelab import timeutil, wellknown
from kubelab.models import (
    Deployment,
    DeploymentCondition,
    DeploymentStatus,
    IntOrString,
    PodTemplateSpec,
    ReplicaSet,
)

HASH_LABEL = wellknown.POD_TEMPLATE_HASH
REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
ROLLBACK_TO = "deprecated.deployment.rollback.to"
_NOT_COPIED = {LAST_APPLIED, REVISION, REVISION_HISTORY, DESIRED_REPLICAS, MAX_REPLICAS, ROLLBACK_TO}
MAX_REVISION_HISTORY_CHARS = 2000
MAX_INT32 = 2**31 - 1

# apimachinery's rand.SafeEncodeString alphabet: no vowels, no look-alikes (0/o, 1/l, 3/e).
SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

# Reasons (deployment/util).
NEW_RS_REASON = "NewReplicaSetCreated"
FOUND_NEW_RS_REASON = "FoundNewReplicaSet"
RS_UPDATED_REASON = "ReplicaSetUpdated"
NEW_RS_AVAILABLE_REASON = "NewReplicaSetAvailable"
TIMED_OUT_REASON = "ProgressDeadlineExceeded"
FAILED_RS_CREATE_REASON = "ReplicaSetCreateError"
PAUSED_REASON = "DeploymentPaused"
RESUMED_REASON = "DeploymentResumed"


# --- pod-template-hash ----------------------------------------------------------------------------

def _fnv32a(data: bytes) -> int:
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


def safe_encode(text: str) -> str:
    """rand.SafeEncodeString: each character mapped to the safe alphabet by its code point."""
    return "".join(SAFE_ALPHABET[ord(ch) % len(SAFE_ALPHABET)] for ch in text)


def compute_hash(template: PodTemplateSpec | None, collision_count: int | None = None) -> str:
    """controller.ComputeHash in kubelab's terms. kube hashes a Go spew dump of the template with FNV-32a,
    which cannot be reproduced outside Go; kubelab hashes the template's canonical JSON (sorted keys, no
    spaces) with the same FNV-32a, adds the collision count the same way (little-endian uint32 and four
    zero bytes), and encodes the decimal value with the same alphabet, so names look like kube's
    (`web-775855699b`) and stay stable for a given template."""
    data = orjson.dumps(template.to_dict() if template else {}, option=orjson.OPT_SORT_KEYS)
    if collision_count is not None:
        data += collision_count.to_bytes(4, "little") + b"\0\0\0\0"
    return safe_encode(str(_fnv32a(data)))


def template_without_hash(template: PodTemplateSpec | None) -> dict[str, object]:
    data = template.to_dict() if template else {}
    labels = (data.get("metadata") or {}).get("labels")
    if isinstance(labels, dict) and HASH_LABEL in labels:
        labels = {k: v for k, v in labels.items() if k != HASH_LABEL}
        data["metadata"] = {**data["metadata"], "labels": labels or None}
        if not labels:
            data["metadata"].pop("labels")
    return data


def equal_ignore_hash(a: PodTemplateSpec | None, b: PodTemplateSpec | None) -> bool:
    return template_without_hash(a) == template_without_hash(b)


# --- fenceposts -----------------------------------------------------------------------------------

def scaled_value(value: IntOrString | None, total: int, *, round_up: bool) -> int:
    """intstr.GetScaledValueFromIntOrPercent: an int as is; "25%" of total, rounded up or down."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    text = value.strip()
    if not text.endswith("%"):
        raise ValueError(f"invalid value for IntOrString: invalid type: string is not a percentage: "
                         f"{value!r}")
    percent = int(text[:-1])
    scaled = percent * total / 100
    return math.ceil(scaled) if round_up else math.floor(scaled)


def _rolling(d: Deployment) -> tuple[IntOrString | None, IntOrString | None] | None:
    strategy = d.spec.strategy if d.spec else None
    if strategy is None or (strategy.type or "RollingUpdate") != "RollingUpdate":
        return None
    ru = strategy.rolling_update
    return (ru.max_surge if ru else "25%"), (ru.max_unavailable if ru else "25%")


def replicas_of(d: Deployment) -> int:
    replicas = d.spec.replicas if d.spec else None
    return 1 if replicas is None else replicas


def resolve_fenceposts(max_surge: IntOrString | None, max_unavailable: IntOrString | None,
                       desired: int) -> tuple[int, int]:
    """ResolveFenceposts: surge rounds up, unavailable rounds down, and both 0 would deadlock, so then
    one pod may be unavailable. 3 replicas at 25%/25% -> (1, 0); 10 -> (3, 2); 1 -> (1, 0)."""
    surge = scaled_value(max_surge, desired, round_up=True)
    unavailable = scaled_value(max_unavailable, desired, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def max_surge(d: Deployment) -> int:
    rolling = _rolling(d)
    if rolling is None:
        return 0
    return resolve_fenceposts(rolling[0], rolling[1], replicas_of(d))[0]


def max_unavailable(d: Deployment) -> int:
    rolling = _rolling(d)
    replicas = replicas_of(d)
    if rolling is None or replicas == 0:
        return 0
    return min(resolve_fenceposts(rolling[0], rolling[1], replicas)[1], replicas)


# --- sums over ReplicaSets ------------------------------------------------------------------------

def spec_replicas(rs: ReplicaSet | None) -> int:
    return ((rs.spec.replicas if rs.spec else None) or 0) if rs is not None else 0


def _status(rs: ReplicaSet | None, field: str) -> int:
    if rs is None or rs.status is None:
        return 0
    return getattr(rs.status, field) or 0


def total_spec(rss: Iterable[ReplicaSet | None]) -> int:
    return sum(spec_replicas(rs) for rs in rss)


def total_status(rss: Iterable[ReplicaSet | None], field: str) -> int:
    return sum(_status(rs, field) for rs in rss)


def active(rss: Iterable[ReplicaSet | None]) -> list[ReplicaSet]:
    """FilterActiveReplicaSets: those with spec.replicas > 0."""
    return [rs for rs in rss if rs is not None and spec_replicas(rs) > 0]


def _created(rs: ReplicaSet) -> tuple[str, str]:
    return rs.metadata.creation_timestamp or "", rs.metadata.name or ""


def by_creation(rss: Iterable[ReplicaSet]) -> list[ReplicaSet]:
    """ReplicaSetsByCreationTimestamp: oldest first, then by name."""
    return sorted(rss, key=_created)


def revision_of(obj: ReplicaSet | Deployment) -> int:
    text = (obj.metadata.annotations or {}).get(REVISION, "")
    try:
        return int(text)
    except ValueError:
        return 0


def by_revision(rss: Iterable[ReplicaSet]) -> list[ReplicaSet]:
    """ReplicaSetsByRevision: lowest revision first, then by creation."""
    return sorted(rss, key=lambda rs: (revision_of(rs), _created(rs)))


def max_revision(rss: Iterable[ReplicaSet]) -> int:
    return max((revision_of(rs) for rs in rss), default=0)


def find_new(d: Deployment, rss: list[ReplicaSet]) -> ReplicaSet | None:
    """FindNewReplicaSet: the oldest RS whose template equals the Deployment's, ignoring the hash label."""
    template = d.spec.template if d.spec else None
    for rs in by_creation(rss):
        if equal_ignore_hash(rs.spec.template if rs.spec else None, template):
            return rs
    return None


# --- how many replicas --------------------------------------------------------------------------

def new_rs_new_replicas(d: Deployment, all_rss: list[ReplicaSet | None], new_rs: ReplicaSet) -> int:
    """NewRSNewReplicas: RollingUpdate grows the new RS up to replicas + surge pods in all, never past
    `replicas` itself; Recreate sets it to `replicas` at once."""
    replicas = replicas_of(d)
    if _rolling(d) is None:
        return replicas
    current = total_spec(all_rss)
    max_total = replicas + max_surge(d)
    if current >= max_total:
        return spec_replicas(new_rs)
    return spec_replicas(new_rs) + min(max_total - current, replicas - spec_replicas(new_rs))


def max_scaled_down(d: Deployment, all_rss: list[ReplicaSet | None], new_rs: ReplicaSet | None) -> int:
    """reconcileOldReplicaSets' budget: pods that may go without dropping below replicas - unavailable,
    counting the new RS's not-yet-available pods as already unavailable."""
    min_available = replicas_of(d) - max_unavailable(d)
    new_unavailable = spec_replicas(new_rs) - _status(new_rs, "available_replicas")
    return total_spec(all_rss) - min_available - new_unavailable


def cleanup_unhealthy(old_rss: list[ReplicaSet], budget: int) -> list[tuple[ReplicaSet, int]]:
    """cleanupUnhealthyReplicas: first shrink old RSs by their unavailable pods, oldest first, within
    `budget`. Returns (rs, new size) for each RS to scale."""
    plan, total = [], 0
    for rs in by_creation(old_rss):
        if total >= budget:
            break
        size, available = spec_replicas(rs), _status(rs, "available_replicas")
        if size == 0 or size == available:
            continue
        down = min(budget - total, size - available)
        plan.append((rs, size - down))
        total += down
    return plan


def scale_down_old(d: Deployment, all_rss: list[ReplicaSet | None], old_rss: list[ReplicaSet]
                   ) -> list[tuple[ReplicaSet, int]]:
    """scaleDownOldReplicaSetsForRollingUpdate: shrink old RSs, oldest first, by the available pods
    above replicas - unavailable."""
    min_available = replicas_of(d) - max_unavailable(d)
    available = total_status(all_rss, "available_replicas")
    if available <= min_available:
        return []
    budget, total, plan = available - min_available, 0, []
    for rs in by_creation(old_rss):
        if total >= budget:
            break
        size = spec_replicas(rs)
        if size == 0:
            continue
        down = min(size, budget - total)
        plan.append((rs, size - down))
        total += down
    return plan


def find_active_or_latest(new_rs: ReplicaSet | None, old_rss: list[ReplicaSet]) -> ReplicaSet | None:
    if new_rs is None and not old_rss:
        return None
    newest_first = list(reversed(by_creation(old_rss)))
    candidates = active(newest_first + [new_rs])
    if not candidates:
        return new_rs if new_rs is not None else newest_first[0]
    return candidates[0] if len(candidates) == 1 else None


def desired_annotation(rs: ReplicaSet) -> int | None:
    try:
        return int((rs.metadata.annotations or {})[DESIRED_REPLICAS])
    except (KeyError, ValueError):
        return None


def is_saturated(d: Deployment, rs: ReplicaSet | None) -> bool:
    if rs is None:
        return False
    replicas = replicas_of(d)
    return (desired_annotation(rs) == replicas and spec_replicas(rs) == replicas
            and _status(rs, "available_replicas") == replicas)


def _round_half_away(x: float) -> int:
    """Go's math.Round: halves away from zero (Python's round() would go to even)."""
    return int(math.copysign(math.floor(abs(x) + 0.5), x))


def _fraction(rs: ReplicaSet, d: Deployment) -> int:
    """getReplicaSetFraction: how much of a resize this RS takes, from its max-replicas annotation."""
    if replicas_of(d) == 0:
        return -spec_replicas(rs)
    new_max = replicas_of(d) + max_surge(d)
    try:
        old_max = int((rs.metadata.annotations or {})[MAX_REPLICAS])
    except (KeyError, ValueError):
        old_max = 0
    if old_max == 0:
        old_max = (d.status.replicas if d.status else None) or 0
        if old_max == 0:
            return 0
    return _round_half_away(spec_replicas(rs) * new_max / old_max) - spec_replicas(rs)


def proportional_sizes(d: Deployment, rss: list[ReplicaSet]) -> tuple[list[tuple[ReplicaSet, int]], str]:
    """The rolling-update branch of scale(): spread replicas + surge - Σspec over the active RSs in
    proportion to their size (largest first; newer first when growing, older first when shrinking),
    the rounding leftover going to the first. Returns (rs, new size) for each active RS and "up"/"down".

    Example: 10 replicas (surge 3) mid-rollout with old=8, new=5 (13 in all), resized to 20 (surge 5):
    25 - 13 = 12 to add; old gets round(8*25/13) - 8 = 7, new round(5*25/13) - 5 = 5; sizes 15 and 10."""
    active_rss = active(rss)
    allowed = replicas_of(d) + max_surge(d) if replicas_of(d) > 0 else 0
    to_add = allowed - total_spec(active_rss)
    if to_add > 0:
        ordered = _stable_size_sort(active_rss, newer_first=True)  # larger first; among equals newer first
        operation = "up"
    elif to_add < 0:
        ordered = _stable_size_sort(active_rss, newer_first=False)
        operation = "down"
    else:
        ordered, operation = list(active_rss), ""
    added = 0
    sizes: dict[int, int] = {}
    for rs in ordered:
        if to_add != 0:
            share = _proportion(rs, d, to_add, added)
            sizes[id(rs)] = spec_replicas(rs) + share
            added += share
        else:
            sizes[id(rs)] = spec_replicas(rs)
    if ordered and to_add != 0:
        first = ordered[0]
        sizes[id(first)] = max(0, sizes[id(first)] + to_add - added)
    return [(rs, sizes[id(rs)]) for rs in ordered], operation


def _stable_size_sort(rss: list[ReplicaSet], *, newer_first: bool) -> list[ReplicaSet]:
    by_age = by_creation(rss)
    if newer_first:
        by_age.reverse()
    return sorted(by_age, key=lambda rs: -spec_replicas(rs))


def _proportion(rs: ReplicaSet, d: Deployment, to_add: int, added: int) -> int:
    if spec_replicas(rs) == 0 or to_add == 0 or to_add == added:
        return 0
    fraction = _fraction(rs, d)
    allowed = to_add - added
    return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)


# --- annotations ----------------------------------------------------------------------------------

def replicas_annotations_need_update(rs: ReplicaSet, desired: int, max_replicas: int) -> bool:
    annotations = rs.metadata.annotations or {}
    return (annotations.get(DESIRED_REPLICAS) != str(desired)
            or annotations.get(MAX_REPLICAS) != str(max_replicas))


def set_replicas_annotations(rs: ReplicaSet, desired: int, max_replicas: int) -> bool:
    if not replicas_annotations_need_update(rs, desired, max_replicas):
        return False
    rs.metadata.annotations = {**(rs.metadata.annotations or {}), DESIRED_REPLICAS: str(desired),
                               MAX_REPLICAS: str(max_replicas)}
    return True


def set_new_rs_annotations(d: Deployment, rs: ReplicaSet, new_revision: str, *, exists: bool) -> bool:
    """SetNewReplicaSetAnnotations: copy the Deployment's annotations (not kubectl's last-applied nor
    the controller's own), raise the revision (remembering the old one in revision-history when an old
    RS comes back), and on a new RS set desired- and max-replicas. Edits `rs`; True if anything changed."""
    annotations = dict(rs.metadata.annotations or {})
    changed = False
    for key, value in (d.metadata.annotations or {}).items():
        if key in _NOT_COPIED or annotations.get(key) == value:
            continue
        annotations[key] = value
        changed = True
    old_revision = annotations.get(REVISION, "")
    try:
        old_number = int(old_revision) if old_revision else 0
    except ValueError:
        old_number = 0
    if old_number < int(new_revision):
        annotations[REVISION] = new_revision
        changed = True
        if old_revision and exists:
            history = [h for h in annotations.get(REVISION_HISTORY, "").split(",") if h] + [old_revision]
            while len(",".join(history)) > MAX_REVISION_HISTORY_CHARS and len(history) > 1:
                history.pop(0)
            annotations[REVISION_HISTORY] = ",".join(history)
    rs.metadata.annotations = annotations
    if not exists and set_replicas_annotations(rs, replicas_of(d), replicas_of(d) + max_surge(d)):
        changed = True
    return changed


# --- status ---------------------------------------------------------------------------------------

def condition_of(status: DeploymentStatus | None, type_: str) -> DeploymentCondition | None:
    for cond in (status.conditions if status else None) or []:
        if cond.type == type_:
            return cond
    return None


def new_condition(type_: str, status: str, reason: str, message: str, now: datetime) -> DeploymentCondition:
    stamp = timeutil.rfc3339(now)
    return DeploymentCondition(type=type_, status=status, last_update_time=stamp, last_transition_time=stamp,
                               reason=reason, message=message)


def set_condition(status: DeploymentStatus, cond: DeploymentCondition) -> None:
    """SetDeploymentCondition: same status and reason is a no-op; same status keeps lastTransitionTime;
    the replaced condition moves to the end."""
    current = condition_of(status, cond.type or "")
    if current is not None and current.status == cond.status and current.reason == cond.reason:
        return
    if current is not None and current.status == cond.status:
        cond.last_transition_time = current.last_transition_time
    status.conditions = [c for c in status.conditions or [] if c.type != cond.type] + [cond]


def remove_condition(status: DeploymentStatus, type_: str) -> None:
    status.conditions = [c for c in status.conditions or [] if c.type != type_] or None


def has_progress_deadline(d: Deployment) -> bool:
    deadline = d.spec.progress_deadline_seconds if d.spec else None
    return deadline is not None and deadline != MAX_INT32


def calculate_status(all_rss: list[ReplicaSet | None], new_rs: ReplicaSet | None, d: Deployment,
                     now: datetime) -> DeploymentStatus:
    """calculateStatus: counts summed over the RSs and the Available condition. Zero counts are left
    out, as Go's omitempty does."""
    available = total_status(all_rss, "available_replicas")
    unavailable = max(0, total_spec(all_rss) - available)
    old = d.status or DeploymentStatus()
    status = DeploymentStatus(
        observed_generation=d.metadata.generation,
        replicas=total_status(all_rss, "replicas") or None,
        updated_replicas=total_status([new_rs], "replicas") or None,
        ready_replicas=total_status(all_rss, "ready_replicas") or None,
        available_replicas=available or None,
        unavailable_replicas=unavailable or None,
        collision_count=old.collision_count,
        conditions=[c.model_copy() for c in old.conditions or []] or None)
    if available >= replicas_of(d) - max_unavailable(d):
        cond = new_condition("Available", "True", "MinimumReplicasAvailable",
                             "Deployment has minimum availability.", now)
    else:
        cond = new_condition("Available", "False", "MinimumReplicasUnavailable",
                             "Deployment does not have minimum availability.", now)
    set_condition(status, cond)
    return status


def _n(value: int | None) -> int:
    return value or 0


def is_complete(d: Deployment, status: DeploymentStatus) -> bool:
    """DeploymentComplete: every replica updated and available, nothing old left, and the latest spec seen."""
    replicas = replicas_of(d)
    return (_n(status.updated_replicas) == replicas and _n(status.replicas) == replicas
            and _n(status.available_replicas) == replicas
            and _n(status.observed_generation) >= _n(d.metadata.generation))


def is_progressing(d: Deployment, status: DeploymentStatus) -> bool:
    """DeploymentProgressing: more updated, fewer old, more ready or more available than last time."""
    old = d.status or DeploymentStatus()
    old_old = _n(old.replicas) - _n(old.updated_replicas)
    new_old = _n(status.replicas) - _n(status.updated_replicas)
    return (_n(status.updated_replicas) > _n(old.updated_replicas) or new_old < old_old
            or _n(status.ready_replicas) > _n(old.ready_replicas)
            or _n(status.available_replicas) > _n(old.available_replicas))


def timed_out(d: Deployment, status: DeploymentStatus, now: datetime) -> bool:
    """DeploymentTimedOut: no progress for progressDeadlineSeconds since the condition last moved."""
    cond = condition_of(status, "Progressing")
    if cond is None or not has_progress_deadline(d):
        return False
    if cond.reason == TIMED_OUT_REASON:
        return True
    if cond.reason == NEW_RS_AVAILABLE_REASON:
        return False
    since = timeutil.parse(cond.last_update_time)
    deadline = d.spec.progress_deadline_seconds if d.spec else None
    return since is not None and deadline is not None and since + timedelta(seconds=deadline) < now


def rollout_status(d: Deployment, all_rss: list[ReplicaSet | None], new_rs: ReplicaSet | None,
                   now: datetime) -> DeploymentStatus:
    """syncRolloutStatus's new status: calculate_status plus the Progressing condition (kube's reasons and
    messages) and any ReplicaFailure copied from the RSs."""
    status = calculate_status(all_rss, new_rs, d, now)
    if not has_progress_deadline(d):
        remove_condition(status, "Progressing")
    current = condition_of(d.status, "Progressing")
    complete_already = (_n(status.replicas) == _n(status.updated_replicas) and current is not None
                        and current.reason == NEW_RS_AVAILABLE_REASON)
    if has_progress_deadline(d) and not complete_already:
        subject = (f'ReplicaSet "{new_rs.metadata.name}"' if new_rs is not None
                   else f'Deployment "{d.metadata.name}"')
        if is_complete(d, status):
            set_condition(status, new_condition("Progressing", "True", NEW_RS_AVAILABLE_REASON,
                                                f"{subject} has successfully progressed.", now))
        elif is_progressing(d, status):
            cond = new_condition("Progressing", "True", RS_UPDATED_REASON, f"{subject} is progressing.", now)
            if current is not None:
                if current.status == "True":
                    cond.last_transition_time = current.last_transition_time
                remove_condition(status, "Progressing")
            set_condition(status, cond)
        elif timed_out(d, status, now):
            set_condition(status, new_condition("Progressing", "False", TIMED_OUT_REASON,
                                                f"{subject} has timed out progressing.", now))
    failure = _replica_failure(all_rss, new_rs)
    if failure is not None:
        set_condition(status, failure)
    else:
        remove_condition(status, "ReplicaFailure")
    return status


def _replica_failure(all_rss: list[ReplicaSet | None], new_rs: ReplicaSet | None
                     ) -> DeploymentCondition | None:
    """getReplicaFailures: the new RS's ReplicaFailure condition first, else an old one's."""
    others = [rs for rs in all_rss if rs is not None and rs is not new_rs]
    ordered = ([new_rs] if new_rs is not None else []) + others
    for rs in ordered:
        for cond in (rs.status.conditions if rs.status else None) or []:
            if cond.get("type") == "ReplicaFailure":
                return DeploymentCondition(type="ReplicaFailure", status=cond.get("status"),
                                           last_update_time=cond.get("lastTransitionTime"),
                                           last_transition_time=cond.get("lastTransitionTime"),
                                           reason=cond.get("reason"), message=cond.get("message"))
    return None


def same_status(a: DeploymentStatus | None, b: DeploymentStatus) -> bool:
    return (a or DeploymentStatus()).to_dict() == b.to_dict()
