"""kube's version priority (apimachinery's CompareKubeAwareVersionStrings) and apiextensions' default
deprecation warning, as kubelab/customresources.py computes them. Pure functions."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubelab.customresources import by_priority, compare_versions, deprecation_warning


def test_the_order_kube_documents() -> None:
    # "e.g. v2, v1, v1beta2, v1beta1, v1alpha1", then names that are not kube-like, alphabetically.
    names = ["foo", "v1alpha1", "v1", "v1beta1", "bar", "v2", "v1beta2", "v10", "v11alpha2", "v1.0", "v"]
    assert by_priority(names) == ["v10", "v2", "v1", "v1beta2", "v1beta1", "v11alpha2", "v1alpha1",
                                  "bar", "foo", "v", "v1.0"]


@pytest.mark.parametrize("name", ["v1gamma1", "v1beta", "V1", "v1beta1a", "vv1", "v١", "1"])
def test_names_that_are_not_kube_like_come_last(name: str) -> None:
    assert compare_versions("v1alpha1", name) > 0


def test_leading_zeros_are_kube_like_as_go_reads_them() -> None:
    assert compare_versions("v01", "v1alpha1") > 0 and compare_versions("v01", "v2") < 0


@given(st.lists(st.from_regex(r"\Av[0-9]{1,2}((alpha|beta)[0-9]{1,2})?\Z|\A[a-z0-9]{1,4}\Z"), max_size=8))
def test_the_order_is_a_total_order(names: list[str]) -> None:
    ordered = by_priority(names)
    assert all(compare_versions(a, b) >= 0 for a, b in itertools.pairwise(ordered))
    assert all(compare_versions(a, b) == -compare_versions(b, a) for a in names for b in names)


def _crd(*versions: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"group": "example.com", "names": {"kind": "Gizmo"}, "versions": list(versions)}}


def test_the_default_warning_names_the_newest_served_version_not_deprecated() -> None:
    crd = _crd({"name": "v1alpha1", "served": True, "deprecated": True},
               {"name": "v1beta1", "served": True, "deprecated": True},
               {"name": "v1", "served": True}, {"name": "v2", "served": False},
               {"name": "v1beta2", "served": True})
    assert deprecation_warning(crd, "v1alpha1") == "example.com/v1alpha1 Gizmo is deprecated; use example.com/v1 Gizmo"
    assert deprecation_warning(crd, "v1") is None and deprecation_warning(crd, "v9") is None


def test_the_default_warning_without_a_newer_version_and_a_given_text() -> None:
    crd = _crd({"name": "v1", "served": True, "deprecated": True},
               {"name": "v1beta1", "served": True},
               {"name": "v2", "served": True, "deprecated": True, "deprecationWarning": "gone soon"})
    assert deprecation_warning(crd, "v1") == "example.com/v1 Gizmo is deprecated"
    assert deprecation_warning(crd, "v2") == "gone soon"
