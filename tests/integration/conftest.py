"""Fixtures for the tests that drive the real kubectl against the module's API server.

    kubeconfig   (module)   a kubeconfig for the `apiserver` fixture, in a tmp dir
    kubectl_for  (module)   kubectl_for("1.29") -> a Kubectl for that binary; one discovery cache
                            per version per module (a fresh server port, so never stale)
    kubectl      (function) the dispatcher, /usr/bin/kubectl, as users type it
    private_api  (module)   an API server on an etcd of its own, for tests whose components claim
                            cluster-wide things (kube-dns's 10.96.0.10, the LB pool, nodes) that
                            another module's objects could already hold
    lab_pki      (module)   the lab's CA and serving certificate (kubelab/pki.py), in a tmp dir
    token_apiserver (module) token_apiserver(tokens_csv) -> a context manager of an API server with
                            authentication on: HTTPS with lab_pki's certificate, the users of a
                            --token-auth-file with that text (clients: tokenapi.py)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from kubectltools import Kubectl, write_kubeconfig

from kubelab.etcd import Etcd
from kubelab.pki import LabPKI, ensure_lab_pki


@pytest.fixture(scope="module")
def private_api(tmp_path_factory: pytest.TempPathFactory,
                start_apiserver: Callable[..., AbstractContextManager[str]]) -> Iterator[str]:
    etcd = Etcd(Path(tmp_path_factory.mktemp("private-etcd")) / "data")
    try:
        etcd.start()
        with start_apiserver(etcd.url) as url:
            yield url
    finally:
        etcd.stop()


@pytest.fixture(scope="module")
def lab_pki(tmp_path_factory: pytest.TempPathFactory) -> LabPKI:
    return ensure_lab_pki(tmp_path_factory.mktemp("pki"), ips=[])


@pytest.fixture(scope="module")
def token_apiserver(etcd: Etcd, start_apiserver: Callable[..., AbstractContextManager[str]], lab_pki: LabPKI,
                    tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], AbstractContextManager[str]]:
    def start(tokens_csv: str) -> AbstractContextManager[str]:
        tokens = tmp_path_factory.mktemp("auth") / "tokens.csv"
        tokens.write_text(tokens_csv)
        return start_apiserver(etcd.url, token_auth_file=str(tokens),
                               tls=(str(lab_pki.cert_file), str(lab_pki.key_file), str(lab_pki.ca_file)))
    return start


@pytest.fixture(scope="module")
def kubeconfig(apiserver: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_kubeconfig(tmp_path_factory.mktemp("kubeconfig"), apiserver)


@pytest.fixture(scope="module")
def kubectl_for(kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Kubectl]:
    caches: dict[str, Path] = {}

    def make(version: str) -> Kubectl:
        if version not in caches:
            caches[version] = tmp_path_factory.mktemp(f"kubectl-cache-{version}")
        return Kubectl(version, kubeconfig, caches[version])

    return make


@pytest.fixture
def kubectl(kubectl_for: Callable[[str], Kubectl]) -> Kubectl:
    return kubectl_for("dispatcher")
