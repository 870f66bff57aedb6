"""Scores: how good a feasible node is, 0-100 per plugin, as kube-scheduler computes them.

Integer arithmetic as in Go. LeastAllocated (the default) favours empty nodes, MostAllocated packs
them, BalancedAllocation favours nodes whose cpu and memory use stay even. Pure functions.
"""

from __future__ import annotations

from .cache import NodeInfo
from .resources import Resources

MAX_SCORE = 100


def _least(requested: int, allocatable: int) -> int:
    if allocatable == 0 or requested > allocatable:
        return 0
    return (allocatable - requested) * MAX_SCORE // allocatable


def _most(requested: int, allocatable: int) -> int:
    if allocatable == 0:
        return 0
    return min(requested, allocatable) * MAX_SCORE // allocatable


def _fit_score(nonzero: tuple[int, int], info: NodeInfo, per_resource: object) -> int:
    pairs = [(info.nonzero_cpu + nonzero[0], info.allocatable.milli_cpu),
             (info.nonzero_memory + nonzero[1], info.allocatable.memory)]
    scores = [per_resource(req, alloc) for req, alloc in pairs if alloc > 0]  # type: ignore[operator]
    return sum(scores) // len(scores) if scores else 0


def least_allocated(nonzero: tuple[int, int], info: NodeInfo) -> int:
    """Example: node 4000m/8Gi holding 1000m/2Gi, pod 1000m/2Gi -> cpu 50, memory 50 -> 50."""
    return _fit_score(nonzero, info, _least)


def most_allocated(nonzero: tuple[int, int], info: NodeInfo) -> int:
    return _fit_score(nonzero, info, _most)


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
