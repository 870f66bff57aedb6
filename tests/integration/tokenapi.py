"""Clients of an API server with authentication on, as kube-apiserver serves with --token-auth-file and a
serving certificate: HTTPS with the lab PKI's certificate, a bearer token per user. The server itself is
the `token_apiserver` fixture of tests/integration/conftest.py (on `lab_pki`)."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx
from kubectltools import Kubectl

from kubelab import kubeconfig as kubeconfigs
from kubelab.pki import LabPKI


def token_client(url: str, pki: LabPKI, token: str) -> httpx.Client:
    """An httpx client that presents `token` and trusts only the lab CA."""
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30,
                        verify=ssl.create_default_context(cafile=str(pki.ca_file)))


def token_kubectl(url: str, pki: LabPKI, directory: Path, token: str) -> Kubectl:
    """kubectl 1.33 with a kubeconfig of its own in `directory`: `token`, the lab CA."""
    directory.mkdir(parents=True, exist_ok=True)
    config = kubeconfigs.write(directory / "kubeconfig", url, token=token, ca_file=pki.ca_file)
    return Kubectl("1.33", config, directory / "cache")
