"""scheduler/vectorized.py decides a plain pod over numpy arrays; the loop in algorithm.decide is the
reference. On random clusters (tainted, unschedulable, resource-less and over-committed nodes among
them, every start index, both strategies, percentages that stop the filter early) both give the same
Decision: node, scores, reasons, plugins, next start. And the cache keeps its arrays equal to a fresh
build through every kind of change."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kubelab.models import Node, Pod
from scheduler import score
from scheduler.algorithm import decide
from scheduler.cache import Cache, NodeArrays

TAINTS = [None, {"key": "dedicated", "value": "x", "effect": "NoSchedule"},
          {"key": "soft", "value": "y", "effect": "PreferNoSchedule"}]


def node(name: str, cpu: int, memory_mi: int, pods: int, *, taint: int = 0, unschedulable: bool = False) -> Node:
    spec: dict[str, Any] = {"unschedulable": unschedulable}
    if TAINTS[taint]:
        spec["taints"] = [TAINTS[taint]]
    return Node.from_dict({"metadata": {"name": name}, "spec": spec,
                           "status": {"allocatable": {"cpu": f"{cpu}m", "memory": f"{memory_mi}Mi",
                                                      "pods": str(pods)}}})


def pod(name: str, cpu: int | None, memory_mi: int | None, *, node_name: str | None = None,
        tolerate: bool = False) -> Pod:
    requests = {k: v for k, v in (("cpu", None if cpu is None else f"{cpu}m"),
                                  ("memory", None if memory_mi is None else f"{memory_mi}Mi")) if v is not None}
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x", "resources": {"requests": requests}}]}
    if node_name:
        spec["nodeName"] = node_name
    if tolerate:
        spec["tolerations"] = [{"operator": "Exists"}]
    return Pod.from_dict({"apiVersion": "v1", "kind": "Pod", "spec": spec, "status": {"phase": "Pending"},
                          "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}})


node_st = st.tuples(st.sampled_from([0, 500, 2000, 4000]), st.sampled_from([0, 512, 4096, 32768]),
                    st.integers(0, 4), st.integers(0, 2), st.booleans())
bound_st = st.tuples(st.integers(0, 200), st.sampled_from([None, 0, 100, 900, 3000]),
                     st.sampled_from([None, 0, 200, 1500, 9000]))


@settings(max_examples=300, deadline=None)
@given(nodes=st.lists(node_st, min_size=1, max_size=140), bound=st.lists(bound_st, max_size=120),
       request=st.tuples(st.sampled_from([None, 0, 100, 1000, 3500]), st.sampled_from([None, 0, 500, 5000])),
       tolerate=st.booleans(), start=st.integers(0, 500), percentage=st.sampled_from([0, 5, 50, 100]),
       strategy=st.sampled_from([score.LEAST_ALLOCATED, score.MOST_ALLOCATED]), seed=st.integers(0, 2**16))
def test_the_vectorized_decision_is_the_loops(nodes: list[tuple[int, int, int, int, bool]],
                                              bound: list[tuple[int, int | None, int | None]],
                                              request: tuple[int | None, int | None], tolerate: bool, start: int,
                                              percentage: int, strategy: str, seed: int) -> None:
    cache = Cache()
    for i, (cpu, mem, pods, taint, unschedulable) in enumerate(nodes):
        cache.set_node(node(f"n{i}", cpu, mem, pods, taint=taint, unschedulable=unschedulable))
    for j, (where, cpu, mem) in enumerate(bound):  # bound pods may over-commit a node: the watch says so
        cache.set_pod(pod(f"b{j}", cpu, mem, node_name=f"n{where % len(nodes)}"))
    candidate = pod("new", *request, tolerate=tolerate)

    arrays = cache.node_arrays()
    loop = decide(candidate, cache.node_list(), strategy=strategy, rng=random.Random(seed), percentage=percentage,
                  start=start)
    fast = decide(candidate, cache.node_list(), strategy=strategy, rng=random.Random(seed), percentage=percentage,
                  start=start, arrays=arrays)

    assert (fast.node, fast.scores, fast.reasons, fast.plugins, fast.next_start, fast.message) == (
        loop.node, loop.scores, loop.reasons, loop.plugins, loop.next_start, loop.message)


def same_arrays(a: NodeArrays, b: NodeArrays) -> bool:
    fields = ("alloc_cpu", "alloc_mem", "alloc_pods", "used_cpu", "used_mem", "used_pods", "nz_cpu", "nz_mem",
              "plain")
    return a.names == b.names and all(np.array_equal(getattr(a, f), getattr(b, f)) for f in fields)


op_st = st.tuples(st.sampled_from(["node", "bind", "assume", "forget", "remove_pod", "remove_node", "taint"]),
                  st.integers(0, 6), st.integers(0, 8), st.sampled_from([None, 0, 250, 1000]))


@settings(max_examples=200, deadline=None)
@given(st.lists(op_st, max_size=60))
def test_the_cache_keeps_its_arrays_current(ops: list[tuple[str, int, int, int | None]]) -> None:
    cache = Cache()
    for op, n, p, cpu in ops:
        name, key = f"n{n}", f"default/p{p}"
        if op == "node":
            cache.set_node(node(name, 1000 + 100 * n, 2048, 10))
        elif op == "taint":
            cache.set_node(node(name, 1000, 2048, 10, taint=1 + n % 2))
        elif op == "bind":
            cache.set_pod(pod(f"p{p}", cpu, 100, node_name=name))
        elif op == "assume":
            cache.assume(pod(f"p{p}", cpu, 100), name)
        elif op == "forget":
            cache.forget(key)
        elif op == "remove_pod":
            cache.remove_pod(key)
        else:
            cache.remove_node(name)
        cache.node_arrays()  # kept, and updated in place from here on
        assert same_arrays(cache.node_arrays(), NodeArrays(cache.node_list()))
