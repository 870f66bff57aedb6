"""`kubelab up --token-auth-file`: the Service, EndpointSlice and ServiceCIDR informers every node's proxy
agent shares list and watch as kube-proxy does, as the user system:kube-proxy (kube-up's known_tokens.csv
gives kube-proxy such a token), which kube's bootstrap policy binds to system:node-proxier; not as the
admin. The token is written into the token file like the other components'; with it, the real kubectl may
list and watch what system:node-proxier grants and nothing else (Secrets: kube's 403 words). Taking the
binding away (autoupdate "false", so the next start does not put it back) leaves the informers with
RBAC's 403 for system:kube-proxy at the next start, and `kubelab up` waits until the admin gives it back.
Render dataplane, so no root is needed."""

from __future__ import annotations

import json
from pathlib import Path

from kubectltools import Kubectl, RenderCluster, wait_for

from kubelab.tokenfile import PROXY_USER, parse

BINDING = "system:node-proxier"


def forbidden(verb: str, resource: str, group: str = "") -> str:
    """RBAC's refusal of a cluster-scoped list/watch, as kube-apiserver words it."""
    return (f'{resource} is forbidden: User "{PROXY_USER}" cannot {verb} resource "{resource}" in API group '
            f'"{group}" at the cluster scope')


def test_the_shared_proxy_informers_act_as_system_kube_proxy(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text('admin-token,alice,1000,"system:masters"\n')
    cluster = RenderCluster(tmp_path / "data", nodes=1, args=("--token-auth-file", str(tokens)))
    cluster.start()
    try:
        proxy_token = next(t for t, u in parse(tokens.read_text()).items() if u.name == PROXY_USER)
        admin = Kubectl("dispatcher", cluster.kubeconfig, tmp_path / "cache")

        def as_proxy(*args: str) -> tuple[int, str, str]:
            run = admin("--token", proxy_token, *args)
            return run.returncode, run.stdout, run.stderr

        # What system:node-proxier grants (kube's bootstrap policy), and what it does not.
        for verb, resource in [("list", "services"), ("watch", "services"), ("list", "endpoints"),
                               ("get", "nodes"), ("list", "endpointslices.discovery.k8s.io"),
                               ("watch", "endpointslices.discovery.k8s.io"),
                               ("list", "servicecidrs.networking.k8s.io"), ("create", "events")]:
            assert as_proxy("auth", "can-i", verb, resource)[1] == "yes\n", (verb, resource)
        for verb, resource in [("get", "secrets"), ("list", "pods"), ("create", "services"),
                               ("get", "services"), ("list", "configmaps")]:
            assert as_proxy("auth", "can-i", verb, resource)[1] == "no\n", (verb, resource)
        code, _, err = as_proxy("get", "secrets", "-A")
        assert code == 1 and err == f"Error from server (Forbidden): {forbidden('list', 'secrets')}\n", err
        code, out, err = as_proxy("get", "services", "-A", "-o", "name")
        assert code == 0 and "service/kubernetes" in out.split(), err

        # Take system:kube-proxy out of its binding, for good (autoupdate "false"), and start again.
        admin.ok("patch", "clusterrolebinding", BINDING, "--type", "merge", "-p", json.dumps({
            "metadata": {"annotations": {"rbac.authorization.kubernetes.io/autoupdate": "false"}},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "somebody-else"}]}))
        cluster.stop()
        cluster.start(wait=False)
        # The informers are refused as system:kube-proxy (with the admin's token they would not be).
        wait_for("the shared informers refused as system:kube-proxy",
                 lambda: forbidden("list", "services") in cluster.log(), timeout=90)
        assert "kubelab is up" not in cluster.log()
        # The admin gives the binding back: the informers' next try lists, every node syncs, and up is up.
        wait_for("the API", lambda: admin("get", "clusterrolebinding", BINDING).returncode == 0, timeout=90)
        admin.ok("patch", "clusterrolebinding", BINDING, "--type", "merge", "-p", json.dumps({
            "metadata": {"annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": PROXY_USER}]}))
        cluster.wait_up(timeout=120)
    except BaseException:
        print(cluster.log()[-5000:])
        raise
    finally:
        cluster.stop()

