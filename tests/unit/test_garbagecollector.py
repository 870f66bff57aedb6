"""The garbage collector's decision for one dependent, and the API server's propagation policy choice."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.registry.strategy import gc_policy
from controllers.garbagecollector import OwnerState, Plan, owner_state, plan
from kubelab.models import OwnerReference, Pod

S, D, W = OwnerState.SOLID, OwnerState.DANGLING, OwnerState.WAITING


def dependent(*owners: str, finalizers: list[str] | None = None, deleting: bool = False) -> Pod:
    meta: dict[str, Any] = {"name": "p", "namespace": "default", "uid": "uid-p",
                            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": o, "uid": o}
                                                for o in owners]}
    if finalizers:
        meta["finalizers"] = finalizers
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return Pod.model_validate({"metadata": meta})


@pytest.mark.parametrize(("obj", "states", "has_dependents", "expected"), [
    pytest.param(dependent("a"), {"a": S}, False, Plan(), id="live owner: keep"),
    pytest.param(dependent("a"), {"a": D}, False, Plan(delete="Background"), id="owner gone: background delete"),
    pytest.param(dependent("a", "b"), {"a": S, "b": D}, False, Plan(remove_refs=("b",)),
                 id="another live owner: patch out the dangling ref"),
    pytest.param(dependent("a", "b"), {"a": S, "b": W}, False, Plan(remove_refs=("b",)),
                 id="another live owner: patch out the waiting ref"),
    pytest.param(dependent("a"), {"a": W}, False, Plan(delete="Background"),
                 id="owner in foreground, no dependents of its own"),
    pytest.param(dependent("a"), {"a": W}, True, Plan(delete="Foreground"),
                 id="owner in foreground, has dependents: foreground too"),
    pytest.param(dependent("a", finalizers=["orphan"]), {"a": D}, False, Plan(delete="Orphan"),
                 id="honours its own orphan finalizer"),
    pytest.param(dependent("a", deleting=True), {"a": D}, False, Plan(), id="already being deleted"),
    pytest.param(dependent(), {}, False, Plan(), id="no owners"),
])
def test_plan(obj: Pod, states: dict[str, OwnerState], has_dependents: bool, expected: Plan) -> None:
    assert plan(obj, states, has_dependents=has_dependents) == expected


def test_owner_state_matches_by_uid() -> None:
    ref = OwnerReference(api_version="apps/v1", kind="ReplicaSet", name="web", uid="uid-1")
    same_name_other_uid = Pod.model_validate({"metadata": {"name": "web", "uid": "uid-2"}})
    assert owner_state(same_name_other_uid, ref) is D
    assert owner_state(None, ref) is D
    owner = Pod.model_validate({"metadata": {"name": "web", "uid": "uid-1"}})
    assert owner_state(owner, ref) is S
    owner.metadata.deletion_timestamp = "2026-01-01T00:00:00Z"
    assert owner_state(owner, ref) is S  # deleting in the background: still an owner until it is gone
    owner.metadata.finalizers = ["foregroundDeletion"]
    assert owner_state(owner, ref) is W


@pytest.mark.parametrize(("options", "finalizers", "expected"), [
    pytest.param({}, [], "Background", id="the resource default"),
    pytest.param({"propagationPolicy": "Foreground"}, [], "Foreground", id="propagationPolicy"),
    pytest.param({"propagationPolicy": "Orphan"}, ["foregroundDeletion"], "Orphan", id="policy beats finalizer"),
    pytest.param({}, ["orphan"], "Orphan", id="an existing finalizer"),
    pytest.param({"orphanDependents": True, "propagationPolicy": "Foreground"}, [], "Orphan",
                 id="the deprecated orphanDependents comes first"),
    pytest.param({"orphanDependents": False}, ["orphan"], "Background", id="orphanDependents false"),
])
def test_gc_policy(options: dict[str, Any], finalizers: list[str], expected: str) -> None:
    assert gc_policy(options, finalizers, "Background") == expected
