"""Eviction: `POST /api/v1/namespaces/NS/pods/NAME/eviction`, what `kubectl drain` calls instead of a
DELETE (pkg/registry/core/pod/storage/eviction.go).

A pod protected by a PodDisruptionBudget goes only while the budget allows a disruption: the budget's
status.disruptionsAllowed is taken down by one and the pod named in status.disruptedPods (the disruption
controller counts it as gone from then on), in one write compared on the budget's resourceVersion, then
the pod gets the DisruptionTarget condition and is deleted with the Eviction's deleteOptions. A budget
at zero is kube's 429 `Cannot evict pod as it would violate the pod's disruption budget.`, which kubectl
drain retries every 5 s. Pods that cannot count against a budget (terminal, Pending, already being
deleted) are deleted at once; an unready pod too where the budget is already met (IfHealthyBudget, the
default) or always (AlwaysAllow).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from kubelab import kinds, timeutil
from kubelab.models import Pod, PodDisruptionBudget
from kubelab.selectors import (
    SelectorError,
    parse_field_selector,
    parse_label_selector,
    selector_from_label_selector,
)
from kubelab.validation import go_quote

from .. import codecs, errors, listoptions
from ..registry import Registry

API_VERSION = "policy/v1"
KIND = "Eviction"
# DisruptedPods above this many entries means the disruption controller is not keeping up: kube refuses.
MAX_DISRUPTED_PODS = 2000
TOO_MANY = "Cannot evict pod as it would violate the pod's disruption budget."


def _parse(body: Any, name: str) -> dict[str, Any]:
    """The Eviction's deleteOptions, or kube's 400 for a body that is not an Eviction of this pod."""
    if not isinstance(body, dict):
        raise errors.bad_request(f"the object provided is unrecognized (must be of type {KIND})")
    kind, api_version = body.get("kind"), body.get("apiVersion")
    if kind not in (None, KIND) or api_version not in (None, API_VERSION, "policy/v1beta1"):
        raise errors.bad_request(f'{KIND} in version "v1" cannot be handled as a {KIND}: no kind "{kind}" is '
                                 f'registered for version "{api_version}"')
    meta = body.get("metadata") or {}
    if not isinstance(meta, dict) or meta.get("name", name) != name:
        raise errors.bad_request("name in URL does not match name in Eviction object")
    options = body.get("deleteOptions") or {}
    if not isinstance(options, dict):
        raise errors.bad_request(f"{KIND} in version \"v1\" cannot be handled as a {KIND}: json: cannot unmarshal "
                                 "into Go struct field Eviction.deleteOptions of type v1.DeleteOptions")
    problems = listoptions.delete_errors(options)
    if problems:
        raise errors.invalid_options("DeleteOptions", problems)
    return options


def _can_ignore_budget(pod: Pod) -> bool:
    """canIgnorePDB: a pod that is not running, or is already going, cannot count against a budget."""
    return (pod.status is not None and pod.status.phase in ("Succeeded", "Failed", "Pending")) or \
        bool(pod.metadata.deletion_timestamp)


def budgets_for(pod: Pod, budgets: list[PodDisruptionBudget]) -> list[PodDisruptionBudget]:
    """getPodDisruptionBudgets: the pod's namespace's budgets whose selector matches its labels; an empty
    or broken selector matches nothing. Pure."""
    found = []
    for pdb in budgets:
        selector = pdb.spec.selector if pdb.spec else None
        if selector is None or not (selector.match_labels or selector.match_expressions):
            continue
        try:
            if selector_from_label_selector(selector).matches(pod.metadata.labels or {}):
                found.append(pdb)
        except SelectorError:
            continue
    return found


def take_disruption(pdb: dict[str, Any], pod_name: str, now: str) -> dict[str, Any]:
    """checkAndDecrement: the budget with one disruption taken for `pod_name`, or kube's refusal. Pure."""
    meta, status = pdb.get("metadata") or {}, dict(pdb.get("status") or {})
    name = meta.get("name", "")
    if (status.get("observedGeneration") or 0) < (meta.get("generation") or 0):
        raise _too_many(f"The disruption budget {name} is still being processed by the server.", retry_after=10)
    allowed = status.get("disruptionsAllowed") or 0
    if allowed < 0:
        raise _forbidden(name, "pdb disruptions allowed is negative")
    disrupted = dict(status.get("disruptedPods") or {})
    if len(disrupted) > MAX_DISRUPTED_PODS:
        raise _forbidden(name, "DisruptedPods map too big - too many evictions not confirmed by PDB controller")
    if allowed == 0:
        raise _too_many(f"The disruption budget {name} needs {status.get('desiredHealthy') or 0} healthy pods and "
                        f"has {status.get('currentHealthy') or 0} currently")
    status["disruptionsAllowed"] = allowed - 1
    if allowed - 1 == 0:  # UpdateDisruptionAllowedCondition
        status["conditions"] = _allowed_condition(status.get("conditions") or [], now)
    disrupted[pod_name] = now
    status["disruptedPods"] = disrupted
    return {**pdb, "status": status}


def _allowed_condition(conditions: list[dict[str, Any]], now: str) -> list[dict[str, Any]]:
    kept = [c for c in conditions if c.get("type") != "DisruptionAllowed"]
    old = next((c for c in conditions if c.get("type") == "DisruptionAllowed"), None)
    since = old.get("lastTransitionTime") if old and old.get("status") == "False" else now
    return [*kept, {"type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods", "message": "",
                    "observedGeneration": (old or {}).get("observedGeneration", 0), "lastTransitionTime": since}]


def _forbidden(pdb_name: str, reason: str) -> errors.StatusError:
    """errors.NewForbidden(policy.Resource("poddisruptionbudget"), name, reason): kube's singular resource."""
    return errors.StatusError(403, "Forbidden", f"poddisruptionbudget.policy {go_quote(pdb_name)} is forbidden: "
                              f"{reason}", {"name": pdb_name, "group": "policy", "kind": "poddisruptionbudget"})


def _too_many(cause: str, *, retry_after: int = 0) -> errors.StatusError:
    """errors.NewTooManyRequests(TOO_MANY, retry_after) with a DisruptionBudget cause."""
    details: dict[str, Any] = {"causes": [{"reason": "DisruptionBudget", "message": cause}]}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
    return errors.StatusError(429, "TooManyRequests", TOO_MANY, details)


async def evict(request: Request, namespace: str, name: str) -> Response:
    registry: Registry = request.app.state.registry
    options = _parse(codecs.decode(codecs.media_type(request), await codecs.read_body(request)), name)
    dry_run = bool(options.get("dryRun")) or bool(request.query_params.getlist("dryRun"))
    pod = Pod.model_validate(await registry.get(kinds.PODS, namespace, name))
    if not _can_ignore_budget(pod):
        everything = (parse_label_selector(None), parse_field_selector(None))
        stored, _ = await registry.list(kinds.PODDISRUPTIONBUDGETS, namespace, *everything)
        matching = budgets_for(pod, [PodDisruptionBudget.model_validate(b) for b in stored])
        if len(matching) > 1:
            raise errors.internal("This pod has more than one PodDisruptionBudget, which the eviction subresource "
                                  "does not support.")
        if matching:
            await _charge(registry, pod, matching[0], dry_run=dry_run)
    if not dry_run:
        await _mark_disrupted(registry, pod)
    await registry.delete(kinds.PODS, namespace, name, preconditions=options.get("preconditions"),
                          dry_run=dry_run, options=options)
    return codecs.respond(request, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                    "code": 201}, 201)


async def _charge(registry: Registry, pod: Pod, pdb: PodDisruptionBudget, *, dry_run: bool) -> None:
    """Take one disruption from the budget, unless the pod is unready and the policy lets it go free."""
    status = pdb.status
    if not pod.is_ready():
        policy = (pdb.spec.unhealthy_pod_eviction_policy if pdb.spec else None) or "IfHealthyBudget"
        healthy, desired = (status.current_healthy or 0, status.desired_healthy or 0) if status else (0, 0)
        if policy == "AlwaysAllow" or (healthy >= desired > 0):
            return
    now = timeutil.rfc3339()

    def take(current: dict[str, Any]) -> dict[str, Any]:
        return take_disruption(current, pod.metadata.name or "", now)

    await registry.guaranteed_update(kinds.PODDISRUPTIONBUDGETS, pod.metadata.namespace, pdb.metadata.name or "",
                                     take, subresource="status", dry_run=dry_run)


async def _mark_disrupted(registry: Registry, pod: Pod) -> None:
    """addConditionAndDeletePod: the pod learns why it goes (DisruptionTarget, EvictionByEvictionAPI),
    which a Job's podFailurePolicy reads."""
    if pod.is_terminal():
        return

    def mark(current: dict[str, Any]) -> dict[str, Any]:
        status = dict(current.get("status") or {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"]
        conditions.append({"type": "DisruptionTarget", "status": "True", "lastProbeTime": None,
                           "lastTransitionTime": timeutil.rfc3339(), "reason": "EvictionByEvictionAPI",
                           "message": "Eviction API: evicting"})
        return {**current, "status": {**status, "conditions": conditions}}

    try:
        await registry.guaranteed_update(kinds.PODS, pod.metadata.namespace, pod.metadata.name or "", mark,
                                         subresource="status")
    except errors.StatusError as exc:
        if exc.code != 404:
            raise
