"""`kubelab explain pod`: why a pod is (or is not) on a node, node by node, in kube-scheduler's words.

`explain()` is pure: given the pod, the nodes and the other pods (a fresh list from the API server),
it runs every filter on every node — without the sampling a real scheduling cycle does — and scores
every node that passes, plugin by plugin. A pod already bound is explained as the scheduler saw it:
without its own requests on its node. `render()` turns the result into the table the CLI prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubelab import quantity
from kubelab.models import Node, Pod

from . import score
from .algorithm import candidate_nodes, num_feasible_nodes_to_find
from .cache import Cache, NodeInfo
from .fit import AFFINITY_CONFLICT, NODE_AFFINITY_PLUGIN, PodContext, failure_message, filter_node

# Score columns: plugin, header, and what the legend says about it.
COLUMNS = [(score.NODE_RESOURCES_FIT, "FIT"), (score.BALANCED_ALLOCATION, "BALANCED"),
           (score.TAINT_TOLERATION, "TAINTS"), (score.NODE_AFFINITY, "AFFINITY")]


@dataclass
class NodeVerdict:
    name: str
    plugin: str | None = None                 # the filter that rejected the node
    reasons: list[str] = field(default_factory=list)
    scores: dict[str, int] = field(default_factory=dict)   # plugin -> normalized score (feasible nodes)
    total: int | None = None
    mark: str = ""                            # "picked", "would pick", "tied"

    @property
    def feasible(self) -> bool:
        return self.plugin is None


@dataclass
class Explanation:
    pod: str
    bound_to: str | None
    requests: str
    strategy: str
    nodes: list[NodeVerdict]
    message: str | None                       # the FitError text when no node fits
    sampled: int                              # feasible nodes a real cycle stops at (percentageOfNodesToScore)
    plugins: list[str]                        # the score plugins that ran
    last_said: str | None = None              # the pod's PodScheduled=False message, if the scheduler wrote one


def _describe_requests(ctx: PodContext) -> str:
    req = ctx.request
    parts = [f"cpu {quantity.format_milli_cpu(req.milli_cpu)}", f"memory {quantity.format_bytes(req.memory)}"]
    parts += [f"{name} {value}" for name, value in sorted(req.scalar.items())]
    return ", ".join(parts)


def explain(pod: Pod, nodes: list[Node], pods: list[Pod], *,
            strategy: str = score.LEAST_ALLOCATED) -> Explanation:
    cache = Cache()
    for node in nodes:
        cache.set_node(node)
    for other in pods:
        if other.key != pod.key:
            cache.set_pod(other)
    infos = cache.node_list()
    bound_to = pod.node_name or None
    if bound_to and pod.spec is not None:
        # Explain the decision, not the outcome: the scheduler saw the pod before spec.nodeName was set.
        pod = pod.model_copy(update={"spec": pod.spec.model_copy(update={"node_name": None})})
    ctx = PodContext(pod)
    verdicts = {info.name: NodeVerdict(info.name) for info in infos}
    message = None
    candidates: list[NodeInfo] = []
    if ctx.pinned is not None and not ctx.pinned:
        for v in verdicts.values():
            v.plugin, v.reasons = f"{NODE_AFFINITY_PLUGIN} (PreFilter)", [AFFINITY_CONFLICT]
        message = failure_message(len(infos), {}, prefilter_message=AFFINITY_CONFLICT)
    else:
        candidates, absent = candidate_nodes(ctx, infos)
        kept = {info.name for info in candidates}
        for v in verdicts.values():
            if v.name not in kept and absent:
                v.plugin, v.reasons = f"{NODE_AFFINITY_PLUGIN} (PreFilter)", [absent]
        for info in candidates:
            verdict = filter_node(ctx, info)
            if verdict is not None:
                verdicts[info.name].plugin, verdicts[info.name].reasons = verdict
        feasible = [info for info in candidates if verdicts[info.name].feasible]
        if not feasible:
            rejected = {n: v.reasons for n, v in verdicts.items() if n in kept}
            message = failure_message(len(infos), rejected, absent_reason=absent)
        per_plugin = score.plugin_scores(ctx, feasible, strategy)
        totals = score.total_scores(per_plugin)
        for info in feasible:
            v = verdicts[info.name]
            v.scores = {plugin: values[info.name] for plugin, values in per_plugin.items()}
            v.total = totals[info.name]
    plugins = [p for p, _ in COLUMNS if any(p in v.scores for v in verdicts.values())]
    _mark(verdicts, bound_to)
    ordered = sorted(verdicts.values(), key=lambda v: (not v.feasible, -(v.total or 0), v.name))
    condition = pod.condition("PodScheduled")
    last_said = condition.message if condition is not None and condition.status == "False" else None
    return Explanation(pod.key, bound_to, _describe_requests(ctx), strategy, ordered, message,
                       num_feasible_nodes_to_find(len(candidates)), plugins, last_said)


def _mark(verdicts: dict[str, NodeVerdict], bound_to: str | None) -> None:
    if bound_to is not None:
        if bound_to in verdicts:
            verdicts[bound_to].mark = "picked"
        return
    scored = [v for v in verdicts.values() if v.total is not None]
    if not scored:
        return
    best = max(v.total or 0 for v in scored)
    tied = [v for v in scored if v.total == best]
    for v in tied:
        v.mark = "would pick" if len(tied) == 1 else "tied: one is picked at random"


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def render(expl: Explanation) -> str:
    weights = {p: score.WEIGHTS[p] for p in expl.plugins}
    headers = ["NODE", "FILTER", "RESULT"] + [f"{h}(x{weights[p]})" for p, h in COLUMNS if p in weights]
    headers += ["TOTAL", ""]
    rows = [headers]
    for v in expl.nodes:
        if v.feasible:
            cells = [v.name, "passed", "fits"] + [str(v.scores.get(p, "-")) for p, _ in COLUMNS if p in weights]
            cells += [str(v.total), f"<- {v.mark}" if v.mark else ""]
        else:
            cells = [v.name, v.plugin or "", "; ".join(v.reasons)] + ["-" for p, _ in COLUMNS if p in weights]
            cells += ["-", f"<- {v.mark} (it would not fit now)" if v.mark else ""]
        rows.append(cells)
    if expl.bound_to:
        status = (f"bound to {expl.bound_to} (explained as if it were pending again: without its own requests "
                  "on its node)")
    elif expl.message:
        status = f"Pending: {expl.message}"
    else:
        status = "Pending: would be scheduled"
    lines = [f"Pod {expl.pod}: requests {expl.requests}", f"Status: {status}"]
    if expl.last_said and not expl.bound_to:
        lines.append(f"The scheduler last said: {expl.last_said}")
    lines.append("")
    lines += _table(rows) if expl.nodes else ["(no nodes)"]
    legend = {score.NODE_RESOURCES_FIT: (f"FIT = NodeResourcesFit ({expl.strategy}: cpu and memory, containers "
                                          "without requests count 100m / 200Mi)"),
              score.BALANCED_ALLOCATION: "BALANCED = NodeResourcesBalancedAllocation (cpu and memory use kept even)",
              score.TAINT_TOLERATION: "TAINTS = TaintToleration (fewer untolerated PreferNoSchedule taints is better)",
              score.NODE_AFFINITY: "AFFINITY = NodeAffinity (weights of the matching preferred terms)"}
    lines += ["", "Filters run in kube-scheduler's order; a node's verdict is the first filter that rejects it."]
    if expl.plugins:
        lines += [("Scores are 0-100 per plugin; TOTAL = sum of score x weight; the highest total wins, ties at "
                   "random.")]
        lines += [f"  {legend[p]}" for p in expl.plugins]
    if len(expl.nodes) >= 100:
        lines += [(f"A real scheduling cycle stops filtering after {expl.sampled} feasible nodes "
                   "(percentageOfNodesToScore), starting where the previous cycle stopped, so it scores only "
                   "some of these.")]
    return "\n".join(lines) + "\n"
