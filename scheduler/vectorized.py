"""The common scheduling decision over numpy arrays: the same answer as algorithm.decide's loop, faster.

kube-scheduler filters and scores a few hundred nodes per pod in Go; a Python loop over them cost about
0.6-0.9 ms per decision at 5,000 nodes (BENCHMARKS.md), most of the scheduler's CPU. Most pods ask for
cpu and memory and nothing else (no nodeName, node selector or affinity, host ports, extended
resources), and most nodes have no taints and are schedulable: for those the filters reduce to three
comparisons per node and the scores to a few lines of arithmetic, which numpy does for every node at once.

The cache's `NodeArrays` holds, per node in its node order, what those comparisons read, kept current
as pods are assumed, bound and removed. `decide_plain` gives the decision for a plain pod, or
None when the pod or a node it would need is not plain, in which case the caller runs the loop. Nodes
that are not plain (tainted, unschedulable, without cpu or memory) are judged by the loop's own
`filter_node`, once each, and a feasible one among those to be scored hands the scoring back to the
loop; past MAX_ODD_NODES of them the loop decides outright (its early stop is then the cheaper). The
numbers are bit-for-bit the loop's: integer division on non-negative int64, the same float64 operations
in the same order (tests/unit/test_vectorized.py compares the two on random clusters).
"""

from __future__ import annotations

import random

import numpy as np

from . import score
from .cache import NodeArrays
from .decision import Decision, select_host
from .fit import PodContext, failure_message, filter_node

# Past this many non-plain nodes the loop decides: judging each of them here, on every decision, would
# cost more than the loop's early stop saves.
MAX_ODD_NODES = 64


def is_plain_pod(ctx: PodContext) -> bool:
    request = ctx.request
    return (ctx.pinned is None and not ctx.node_name and not ctx.node_selector and ctx.required_terms is None
            and not ctx.host_ports and not ctx.preferred and not request.ephemeral_storage and not request.scalar)


def decide_plain(ctx: PodContext, arrays: NodeArrays, *, wanted: int, begin: int, strategy: str,
                 rng: random.Random | None) -> Decision | None:
    """The decision for a plain pod over every node in `arrays` (filtering from `begin` until `wanted`
    nodes fit), or None if the loop must decide (many non-plain nodes, or one among those to score)."""
    nodes, count = arrays.nodes, len(arrays.nodes)
    odd = np.flatnonzero(~arrays.plain)
    if len(odd) > MAX_ODD_NODES:
        return None  # mostly tainted or cordoned nodes: the loop, which stops early, is the cheaper
    req_cpu, req_mem = ctx.request.milli_cpu, ctx.request.memory
    feasible = ((arrays.used_pods < arrays.alloc_pods)
                & ((req_cpu == 0) | (req_cpu <= arrays.alloc_cpu - arrays.used_cpu))
                & ((req_mem == 0) | (req_mem <= arrays.alloc_mem - arrays.used_mem))
                & arrays.plain)
    # Tainted, unschedulable or resource-less nodes: the loop's own filter, once each.
    odd_verdicts = {i: filter_node(ctx, nodes[i]) for i in odd.tolist()}
    for i, verdict in odd_verdicts.items():
        feasible[i] = verdict is None
    rolled = np.roll(feasible, -begin) if begin else feasible
    positions = np.flatnonzero(rolled)[:wanted]
    processed = int(positions[-1]) + 1 if len(positions) == wanted else count
    rejected = np.flatnonzero(~rolled[:processed])
    reasons: dict[str, list[str]] = {}
    plugins: dict[str, str] = {}
    for pos in rejected.tolist():
        i = (pos + begin) % count
        info = nodes[i]
        verdict = odd_verdicts[i] if i in odd_verdicts else filter_node(ctx, info)
        assert verdict is not None
        plugins[info.name], reasons[info.name] = verdict
    next_start = (begin + processed) % count
    idx = (positions + begin) % count if begin else positions
    if len(idx) == 0:  # no node fits: the FitError over every node's reasons, as the loop writes it
        return Decision(None, reasons, {}, failure_message(count, reasons), plugins=plugins, next_start=next_start)
    if not arrays.plain[idx].all():
        return None  # a tainted node is among the chosen: its score needs the loop's TaintToleration
    names = arrays.names
    if len(idx) == 1:
        name = names[int(idx[0])]
        return Decision(name, reasons, {name: 0}, plugins=plugins, next_start=next_start, context=ctx)
    pod_cpu, pod_mem = ctx.nonzero
    acpu, amem = arrays.alloc_cpu[idx], arrays.alloc_mem[idx]
    used_cpu, used_mem = arrays.nz_cpu[idx] + pod_cpu, arrays.nz_mem[idx] + pod_mem
    if strategy == score.MOST_ALLOCATED:
        fit = (np.minimum(acpu, used_cpu) * 100 // acpu + np.minimum(amem, used_mem) * 100 // amem) // 2
    else:
        fit = (np.where(used_cpu > acpu, 0, (acpu - used_cpu) * 100 // acpu)
               + np.where(used_mem > amem, 0, (amem - used_mem) * 100 // amem)) // 2
    f_cpu = (arrays.used_cpu[idx] + req_cpu) / acpu
    f_mem = (arrays.used_mem[idx] + req_mem) / amem
    diff = np.minimum(1.0, f_cpu) - np.minimum(1.0, f_mem)
    balanced = ((1 - np.abs(diff) / 2) * 100).astype(np.int64)
    w_fit, w_bal = score.WEIGHTS[score.NODE_RESOURCES_FIT], score.WEIGHTS[score.BALANCED_ALLOCATION]
    # No plain node has a PreferNoSchedule taint: TaintToleration's normalized score is 100 for all.
    totals = w_fit * fit + w_bal * balanced + score.WEIGHTS[score.TAINT_TOLERATION] * score.MAX_SCORE
    scores = dict(zip([names[i] for i in idx.tolist()], totals.tolist(), strict=True))
    return Decision(select_host(scores, rng), reasons, scores, plugins=plugins, next_start=next_start, context=ctx)
