"""Names in request paths are escaped as client-go escapes them: a namespace stored as "x\n" (written
straight into etcd) can still be listed, deleted and finalized, which is how its deletion completes."""

from __future__ import annotations

from kubelab import kinds


def test_valid_names_are_left_as_they_are() -> None:
    assert kinds.PODS.path("default", "web-0", "status") == "/api/v1/namespaces/default/pods/web-0/status"
    assert kinds.NAMESPACES.path(None, "kube-system", "finalize") == "/api/v1/namespaces/kube-system/finalize"


def test_other_names_are_one_escaped_segment() -> None:
    assert kinds.PODS.path("x\n") == "/api/v1/namespaces/x%0A/pods"
    assert kinds.NAMESPACES.path(None, "x\n", "finalize") == "/api/v1/namespaces/x%0A/finalize"
    assert kinds.SERVICES.path("default", "a/b?c#d") == "/api/v1/namespaces/default/services/a%2Fb%3Fc%23d"
