"""Aggregated discovery's pure parts: the Accept negotiation, the kube-aware version order (kube's own
CompareKubeAwareVersionStrings cases) and the document derived from the legacy resource lists."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apiserver import aggregated, discovery
from kubelab import customresources, kinds

V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


# apimachinery/pkg/version/helpers_test.go: (v1, v2, v1 sorts first).
@pytest.mark.parametrize(("first", "second", "first_wins"), [
    ("v1", "v2", False), ("v2", "v1", True), ("v10", "v2", True), ("v1", "v2alpha1", True),
    ("v1", "v2beta1", True), ("v1alpha2", "v1alpha1", True), ("v1beta1", "v2alpha3", True),
    ("v1alpha10", "v1alpha2", True), ("v1beta10", "v1beta2", True), ("foo", "v1beta2", False),
    ("bar", "foo", True), ("version1", "version2", True), ("version1", "version10", True),
])
def test_version_order_is_kubes(first: str, second: str, first_wins: bool) -> None:
    assert (customresources.version_priority(first) > customresources.version_priority(second)) is first_wins


@given(st.text(max_size=200))
def test_negotiate_never_raises(header: str) -> None:
    result = aggregated.negotiate(header)
    assert result is None or result.version in aggregated.VERSIONS


def test_negotiate_picks_kubes_clause() -> None:
    assert aggregated.negotiate(f"{V2},application/json") == aggregated.Negotiated("v2", "application/json")
    assert aggregated.negotiate("application/json") is None
    assert aggregated.negotiate(None) is None
    assert aggregated.negotiate(f"{V2};q=0.1,{V2.replace('v=v2', 'v=v2beta1')}") == \
        aggregated.Negotiated("v2beta1", "application/json")


def test_document_folds_every_legacy_entry_into_its_parent() -> None:
    served = (*kinds.SERVED, *kinds.METRICS)
    document = aggregated.document(served, core=False)
    for item in document.body["items"]:
        for version in item["versions"]:
            legacy = discovery.api_resource_list(f"{item['metadata']['name']}/{version['version']}", served)
            assert legacy is not None
            names = [r["resource"] for r in version["resources"]]
            names += [f"{r['resource']}/{s['subresource']}" for r in version["resources"]
                      for s in r.get("subresources", [])]
            assert sorted(names) == sorted(e["name"] for e in legacy["resources"])
    assert aggregated.document(tuple(served), core=False) is document, "kept for the same catalogue"
    assert aggregated.document(served[:-1], core=False).etag != document.etag
