"""One scheduling decision: filter nodes, score the feasible ones, pick the best. Pure.

This is kube-scheduler's schedulePod (`pkg/scheduler/schedule_one.go`): PreFilter (NodeAffinity may
narrow the nodes to the ones a pod pins by name), then Filter over the nodes starting at a rotating
index until enough feasible nodes are found (percentageOfNodesToScore), then Score only those, and a
random pick among the best totals. The only inputs are the pod, the node list, the start index and a
random generator; the result says where the next decision should start.
"""

from __future__ import annotations

import itertools
import random

from kubelab.models import Pod

from . import score
from .cache import NodeArrays, NodeInfo
from .decision import Decision, select_host
from .fit import AFFINITY_CONFLICT, NO_NODES, NODE_AFFINITY_PLUGIN, PodContext, failure_message, filter_node
from .vectorized import decide_plain, is_plain_pod

# schedule_one.go: below 100 nodes every node is evaluated; the adaptive percentage never drops under 5%.
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


def num_feasible_nodes_to_find(num_nodes: int, percentage: int = 0) -> int:
    """numFeasibleNodesToFind: how many feasible nodes are enough to stop filtering.

    With the default percentage 0 the share adapts to the cluster: 50% minus 1% per 125 nodes, at
    least 5%, and never fewer than 100 nodes. Worked examples: 500 nodes -> 46% -> 230;
    5000 nodes -> 10% -> 500; 6000 nodes -> max(5, 2)% = 5% -> 300; 150 nodes -> 49% -> 73 -> 100.
    """
    if num_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_nodes
    if percentage <= 0:
        percentage = max(MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND, 50 - num_nodes // 125)
    return max(MIN_FEASIBLE_NODES_TO_FIND, num_nodes * percentage // 100)


def candidate_nodes(ctx: PodContext, nodes: list[NodeInfo]) -> tuple[list[NodeInfo], str | None]:
    """PreFilter's node narrowing: the pinned nodes (those that exist), and the reason the others
    count under in the FitError."""
    if ctx.pinned is None:
        return nodes, None
    return [n for n in nodes if n.name in ctx.pinned], f"node(s) didn't satisfy plugin(s) [{NODE_AFFINITY_PLUGIN}]"


def decide(pod: Pod, nodes: list[NodeInfo], *, strategy: str = score.LEAST_ALLOCATED,
           rng: random.Random | None = None, percentage: int = 0, start: int = 0,
           arrays: NodeArrays | None = None) -> Decision:
    """Filter from `start` until enough nodes fit, score those, pick the best (ties at random).
    `arrays` (the same nodes as numpy arrays, Cache.node_arrays) lets a plain pod be decided by
    vectorized.py: the same decision, computed for all nodes at once."""
    total = len(nodes)
    if total == 0:
        return Decision(None, {}, {}, NO_NODES)
    ctx = PodContext(pod)
    if ctx.pinned is not None and not ctx.pinned:
        return Decision(None, {}, {}, failure_message(total, {}, prefilter_message=AFFINITY_CONFLICT),
                        plugins={}, prefilter_rejected=True, next_start=start)
    candidates, absent_reason = candidate_nodes(ctx, nodes)
    count = len(candidates)
    wanted = num_feasible_nodes_to_find(count, percentage)
    begin = start % count if count else 0
    if arrays is not None and arrays.nodes is nodes and count and is_plain_pod(ctx):
        decision = decide_plain(ctx, arrays, wanted=wanted, begin=begin, strategy=strategy, rng=rng)
        if decision is not None:
            return decision
    feasible: list[NodeInfo] = []
    reasons: dict[str, list[str]] = {}
    plugins: dict[str, str] = {}
    processed = 0
    for info in itertools.chain(candidates[begin:], candidates[:begin]):
        processed += 1
        verdict = filter_node(ctx, info)
        if verdict is None:
            feasible.append(info)
            if len(feasible) >= wanted:
                break
        else:
            plugins[info.name], reasons[info.name] = verdict
    next_start = (begin + processed) % count if count else 0
    if not feasible:
        return Decision(None, reasons, {}, failure_message(total, reasons, absent_reason=absent_reason),
                        plugins=plugins, next_start=next_start)
    if len(feasible) == 1:  # schedulePod: a single feasible node is taken without scoring
        return Decision(feasible[0].name, reasons, {feasible[0].name: 0}, plugins=plugins, next_start=next_start,
                        context=ctx)
    totals = score_feasible(ctx, feasible, strategy)
    return Decision(select_host(totals, rng), reasons, totals, plugins=plugins, next_start=next_start,
                    context=ctx)


def score_feasible(ctx: PodContext, feasible: list[NodeInfo], strategy: str) -> dict[str, int]:
    """Every feasible node's TotalScore: the same numbers as score.total_scores(score.plugin_scores(...)),
    computed in one pass with the cpu/memory arithmetic inlined, because this loop runs for hundreds
    of nodes per decision (tests/unit/test_score.py checks the two agree)."""
    pod_cpu, pod_mem = ctx.nonzero
    req_cpu, req_mem = ctx.request.milli_cpu, ctx.request.memory
    most = strategy == score.MOST_ALLOCATED
    w_fit, w_bal = score.WEIGHTS[score.NODE_RESOURCES_FIT], score.WEIGHTS[score.BALANCED_ALLOCATION]
    totals: dict[str, int] = {}
    any_prefer_taints = False
    for info in feasible:
        alloc = info.allocatable
        acpu, amem = alloc.milli_cpu, alloc.memory
        if acpu > 0 and amem > 0:
            used_cpu, used_mem = info.nonzero_cpu + pod_cpu, info.nonzero_memory + pod_mem
            if most:
                fit = (min(acpu, used_cpu) * 100 // acpu + min(amem, used_mem) * 100 // amem) // 2
            else:
                fit = ((0 if used_cpu > acpu else (acpu - used_cpu) * 100 // acpu)
                       + (0 if used_mem > amem else (amem - used_mem) * 100 // amem)) // 2
            requested = info.requested
            f_cpu = (requested.milli_cpu + req_cpu) / acpu
            f_mem = (requested.memory + req_mem) / amem
            diff = min(1.0, f_cpu) - min(1.0, f_mem)
            balanced = int((1 - (diff if diff >= 0 else -diff) / 2) * 100)
        else:  # a node without cpu or memory: the general functions handle the corner cases
            fit = score.fit_score(strategy, ctx.nonzero, info)
            balanced = score.balanced_allocation(ctx.request, info)
        totals[info.name] = w_fit * fit + w_bal * balanced
        any_prefer_taints = any_prefer_taints or bool(info.prefer_taints)
    w_taint = score.WEIGHTS[score.TAINT_TOLERATION]
    if any_prefer_taints:
        tolerations = score.prefer_no_schedule_tolerations(ctx.tolerations)
        raw = {info.name: score.intolerable_taints(tolerations, info) for info in feasible}
        for name, value in score.normalize(raw, reverse=True).items():
            totals[name] += w_taint * value
    else:  # no node has a PreferNoSchedule taint: all raw scores 0, normalized (reversed) to 100
        bonus = w_taint * score.MAX_SCORE
        for name in totals:
            totals[name] += bonus
    if ctx.preferred:
        w_affinity = score.WEIGHTS[score.NODE_AFFINITY]
        raw = {info.name: score.preferred_affinity(ctx, info) for info in feasible}
        for name, value in score.normalize(raw, reverse=False).items():
            totals[name] += w_affinity * value
    return totals
