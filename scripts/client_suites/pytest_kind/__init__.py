"""A stand-in for pytest-kind that points a client library's own test suite at a running `kubelab up`.

kr8s's conftest.py builds ``pytest_kind.cluster.KindCluster(name=..., image=...)``, calls ``create()``, reads
``kubeconfig_path``/``kubectl_path`` and runs ``kubectl(...)``; this package answers those with the kubeconfig that
`kubelab up` wrote (``$KUBELAB_KUBECONFIG``) and the real kubectl, so the suite runs unchanged. Load its plugin
with ``-p pytest_kind.plugin`` (it adds pytest-kind's ``--keep-cluster`` and ``--cluster-name`` options).
"""

from .cluster import KindCluster

__all__ = ["KindCluster"]
