"""Scores: how good a feasible node is, 0-100 per plugin, as kube-scheduler computes them.

Integer arithmetic as in Go. LeastAllocated (the default) favours empty nodes, MostAllocated packs
them, BalancedAllocation favours nodes whose cpu and memory use stay even, TaintToleration prefers
nodes with fewer untolerated PreferNoSchedule taints, NodeAffinity nodes matching the pod's preferred
terms. Each plugin's score is multiplied by its weight in the default profile and summed
(`pkg/scheduler/apis/config/v1/default_plugins.go`). Pure functions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kubelab.models import Toleration
from kubelab.nodeaffinity import term_matches, toleration_matches

from .cache import NodeInfo
from .fit import PodContext
from .resources import Resources

MAX_SCORE = 100

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED)

NODE_RESOURCES_FIT = "NodeResourcesFit"
BALANCED_ALLOCATION = "NodeResourcesBalancedAllocation"
TAINT_TOLERATION = "TaintToleration"
NODE_AFFINITY = "NodeAffinity"

# The default profile's score weights. PodTopologySpread (2), InterPodAffinity (2) and ImageLocality
# (1) are not implemented: they skip or score 0 for pods without spread constraints, pod affinity or
# node images, which is every pod kubelab schedules today.
WEIGHTS = {TAINT_TOLERATION: 3, NODE_AFFINITY: 2, NODE_RESOURCES_FIT: 1, BALANCED_ALLOCATION: 1}


def _least(requested: int, allocatable: int) -> int:
    if allocatable == 0 or requested > allocatable:
        return 0
    return (allocatable - requested) * MAX_SCORE // allocatable


def _most(requested: int, allocatable: int) -> int:
    if allocatable == 0:
        return 0
    return min(requested, allocatable) * MAX_SCORE // allocatable


def _fit_score(nonzero: tuple[int, int], info: NodeInfo, per_resource: Callable[[int, int], int]) -> int:
    pairs = [(info.nonzero_cpu + nonzero[0], info.allocatable.milli_cpu),
             (info.nonzero_memory + nonzero[1], info.allocatable.memory)]
    scores = [per_resource(req, alloc) for req, alloc in pairs if alloc > 0]
    return sum(scores) // len(scores) if scores else 0


def least_allocated(nonzero: tuple[int, int], info: NodeInfo) -> int:
    """Example: node 4000m/8Gi holding 1000m/2Gi, pod 1000m/2Gi -> cpu 50, memory 50 -> 50."""
    return _fit_score(nonzero, info, _least)


def most_allocated(nonzero: tuple[int, int], info: NodeInfo) -> int:
    return _fit_score(nonzero, info, _most)


def fit_score(strategy: str, nonzero: tuple[int, int], info: NodeInfo) -> int:
    return most_allocated(nonzero, info) if strategy == MOST_ALLOCATED else least_allocated(nonzero, info)


def balanced_allocation(request: Resources, info: NodeInfo) -> int:
    """trunc((1 - |cpu_fraction - mem_fraction| / 2) * 100) over real (not defaulted) requests."""
    fractions = []
    for req, used, alloc in ((request.milli_cpu, info.requested.milli_cpu, info.allocatable.milli_cpu),
                             (request.memory, info.requested.memory, info.allocatable.memory)):
        if alloc > 0:
            fractions.append(min((used + req) / alloc, 1.0))
    if len(fractions) < 2:
        return MAX_SCORE
    std = abs(fractions[0] - fractions[1]) / 2
    return int((1 - std) * MAX_SCORE)


def prefer_no_schedule_tolerations(tolerations: Iterable[Toleration]) -> list[Toleration]:
    """getAllTolerationPreferNoSchedule: only tolerations with an empty or PreferNoSchedule effect count."""
    return [t for t in tolerations if not t.effect or t.effect == "PreferNoSchedule"]


def intolerable_taints(tolerations: list[Toleration], info: NodeInfo) -> int:
    """TaintToleration's raw score: how many PreferNoSchedule taints the pod does not tolerate."""
    return sum(1 for taint in info.prefer_taints if not any(toleration_matches(t, taint) for t in tolerations))


def preferred_affinity(ctx: PodContext, info: NodeInfo) -> int:
    """NodeAffinity's raw score: the summed weights of the preferred terms the node matches."""
    return sum(weight for weight, term in ctx.preferred if term_matches(term, info.labels, info.name))


def normalize(raw: dict[str, int], *, reverse: bool) -> dict[str, int]:
    """helper.DefaultNormalizeScore: scale to 0-100 by the maximum; `reverse` turns it upside down.
    All zero stays zero, or becomes 100 everywhere when reversed (no node has a bad taint)."""
    top = max(raw.values(), default=0)
    if top == 0:
        return {name: MAX_SCORE for name in raw} if reverse else dict(raw)
    out = {}
    for name, value in raw.items():
        scaled = MAX_SCORE * value // top
        out[name] = MAX_SCORE - scaled if reverse else scaled
    return out


def plugin_scores(ctx: PodContext, nodes: list[NodeInfo], strategy: str = LEAST_ALLOCATED
                  ) -> dict[str, dict[str, int]]:
    """Every scoring plugin's normalized (unweighted) score for every node: {plugin: {node: score}}.
    NodeAffinity is left out when the pod has no preferred terms (its PreScore returns Skip)."""
    tolerations = prefer_no_schedule_tolerations(ctx.tolerations)
    result = {
        NODE_RESOURCES_FIT: {n.name: fit_score(strategy, ctx.nonzero, n) for n in nodes},
        BALANCED_ALLOCATION: {n.name: balanced_allocation(ctx.request, n) for n in nodes},
        TAINT_TOLERATION: normalize({n.name: intolerable_taints(tolerations, n) for n in nodes}, reverse=True),
    }
    if ctx.preferred:
        result[NODE_AFFINITY] = normalize({n.name: preferred_affinity(ctx, n) for n in nodes}, reverse=False)
    return result


def total_scores(per_plugin: dict[str, dict[str, int]]) -> dict[str, int]:
    """Σ weight × score over the plugins that ran: a node's TotalScore."""
    totals: dict[str, int] = {}
    for plugin, scores in per_plugin.items():
        weight = WEIGHTS[plugin]
        for name, value in scores.items():
            totals[name] = totals.get(name, 0) + weight * value
    return totals
