"""Changing objects with the real kubectl: client-side apply (a three-way strategic merge patch;
`unchanged` when nothing differs), server-side apply (managedFields, conflicts, --force-conflicts,
the client-side to server-side migration), create, replace (a stale resourceVersion is a 409), edit,
label, annotate, patch (strategic, merge, json), delete and --dry-run=server."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from apitools import CORE, create, ns_path, unique_name
from kubectltools import VERSIONS, Kubectl, manifest

CONFLICT_HELP = """Please review the fields above--they currently have other managers. Here
are the ways you can resolve this warning:
* If you intend to manage all of these fields, please re-run the apply
  command with the `--force-conflicts` flag.
* If you do not intend to manage all of the fields, please edit your
  manifest to remove references to the fields that should keep their
  current managers.
* You may co-own fields by updating your manifest to match the existing
  value; in this case, you'll become the manager if the other manager(s)
  stop managing the field (remove it from their configuration).
See https://kubernetes.io/docs/reference/using-api/server-side-apply/#conflicts
"""


@pytest.fixture(scope="module")
def ns(apiserver: str) -> str:
    name = unique_name("kapply")
    with httpx.Client(base_url=apiserver, timeout=10) as api:
        create(api, f"{CORE}/namespaces", {"metadata": {"name": name}})
    return name


@pytest.fixture
def api(apiserver: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=apiserver, timeout=10) as client:
        yield client


def svc(name: str, ns: str, *, ports: list[dict[str, Any]] | None = None, selector: str = "web",
        labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta,
            "spec": {"selector": {"app": selector},
                     "ports": ports if ports is not None else [{"name": "http", "port": 80, "targetPort": 8080}],
                     **spec}}


def write(tmp_path: Path, *docs: dict[str, Any], name: str = "obj.yaml") -> str:
    path = tmp_path / name
    path.write_text(manifest(*docs))
    return str(path)


def stored(api: httpx.Client, ns: str, name: str, resource: str = "services") -> dict[str, Any]:
    resp = api.get(ns_path(resource, ns, name))
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    return body


# --- client-side apply -------------------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
def test_client_side_apply_created_unchanged_configured(kubectl_for: Callable[[str], Kubectl], ns: str,
                                                        api: httpx.Client, tmp_path: Path, version: str) -> None:
    kubectl = kubectl_for(version)
    name = unique_name("csa")
    two_ports = [{"name": "http", "port": 80, "targetPort": 8080}, {"name": "metrics", "port": 9090}]
    path = write(tmp_path, svc(name, ns, ports=two_ports, labels={"app": "web", "tier": "fe"}))
    assert kubectl.ok("apply", "-f", path) == f"service/{name} created\n"
    assert kubectl.ok("apply", "-f", path) == f"service/{name} unchanged\n"
    # Drop a port and a label, reorder, change the selector: a three-way strategic merge patch with
    # `$patch: delete`, `$setElementOrder/ports` and a null label, which the server must apply (not store).
    changed = [{"name": "admin", "port": 8443}, {"name": "http", "port": 80, "targetPort": 8081}]
    path = write(tmp_path, svc(name, ns, ports=changed, selector="web2", labels={"app": "web"}))
    assert kubectl.ok("apply", "-f", path) == f"service/{name} configured\n"
    obj = stored(api, ns, name)
    assert [(p["name"], p["port"], p["targetPort"]) for p in obj["spec"]["ports"]] == \
        [("admin", 8443, 8443), ("http", 80, 8081)]
    assert obj["spec"]["selector"] == {"app": "web2"}
    assert obj["metadata"]["labels"] == {"app": "web"}
    assert not any(k.startswith("$") for k in json.dumps(obj).split('"'))
    assert kubectl.ok("apply", "-f", path) == f"service/{name} unchanged\n"
    managers = {e["manager"]: e["operation"] for e in obj["metadata"]["managedFields"]}
    assert managers == {"kubectl-client-side-apply": "Update"}


def test_client_side_apply_of_a_deployment_merges_containers_by_name(kubectl: Kubectl, ns: str, api: httpx.Client,
                                                                      tmp_path: Path) -> None:
    name = unique_name("dep")

    def deployment(image: str) -> dict[str, Any]:
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                         "template": {"metadata": {"labels": {"app": name}},
                                      "spec": {"containers": [{"name": "app", "image": image},
                                                              {"name": "sidecar", "image": "busybox:1.36"}]}}}}

    assert kubectl.ok("apply", "-f", write(tmp_path, deployment("nginx:1.26"))) == f"deployment.apps/{name} created\n"
    assert kubectl.ok("apply", "-f", write(tmp_path, deployment("nginx:1.27"))) == \
        f"deployment.apps/{name} configured\n"
    resp = api.get(ns_path("deployments", ns, name, group="apps/v1"))
    assert resp.status_code == 200, resp.text
    obj = resp.json().get("spec")
    assert obj is not None
    assert [(c["name"], c["image"]) for c in obj["template"]["spec"]["containers"]] == \
        [("app", "nginx:1.27"), ("sidecar", "busybox:1.36")]


# --- server-side apply -------------------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
def test_server_side_apply(kubectl_for: Callable[[str], Kubectl], ns: str, api: httpx.Client, tmp_path: Path,
                           version: str) -> None:
    kubectl = kubectl_for(version)
    name = unique_name("ssa")
    path = write(tmp_path, svc(name, ns, labels={"team": "a"}))
    assert kubectl.ok("apply", "--server-side", "-f", path) == f"service/{name} serverside-applied\n"
    assert kubectl.ok("apply", "--server-side", "-f", path) == f"service/{name} serverside-applied\n"
    obj = json.loads(kubectl.ok("get", "svc", name, "-n", ns, "-o", "json", "--show-managed-fields"))
    (entry,) = obj["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"], entry["apiVersion"], entry["fieldsType"]) == \
        ("kubectl", "Apply", "v1", "FieldsV1")
    assert entry["fieldsV1"] == {
        "f:metadata": {"f:labels": {"f:team": {}}},
        "f:spec": {"f:ports": {'k:{"port":80,"protocol":"TCP"}': {".": {}, "f:name": {}, "f:port": {},
                                                                  "f:targetPort": {}}},
                   "f:selector": {}}}
    assert obj["spec"]["clusterIP"] and obj["spec"]["ports"][0]["protocol"] == "TCP"

    # Another manager may not change a field kubectl owns...
    other = write(tmp_path, svc(name, ns, selector="other", labels={"team": "a"}), name="other.yaml")
    refused = kubectl("apply", "--server-side", "--field-manager=ci", "-f", other).failed()
    assert refused.stderr == ('error: Apply failed with 1 conflict: conflict with "kubectl": .spec.selector\n'
                              + CONFLICT_HELP)
    assert stored(api, ns, name)["spec"]["selector"] == {"app": "web"}
    # ... unless it forces, and then the field changes hands.
    assert kubectl.ok("apply", "--server-side", "--field-manager=ci", "--force-conflicts", "-f", other) == \
        f"service/{name} serverside-applied\n"
    after = stored(api, ns, name)
    assert after["spec"]["selector"] == {"app": "other"}
    owners = {e["manager"]: e["fieldsV1"] for e in after["metadata"]["managedFields"]}
    assert "f:selector" in owners["ci"]["f:spec"] and "f:selector" not in owners["kubectl"]["f:spec"]

    # A field kubectl stops applying (the label) goes, since nobody else owns it... but the ci
    # manager still applies `team`, so it stays.
    unlabelled = write(tmp_path, svc(name, ns, selector="other"), name="unlabelled.yaml")
    kubectl.ok("apply", "--server-side", "-f", unlabelled)
    assert stored(api, ns, name)["metadata"]["labels"] == {"team": "a"}


def test_server_side_apply_conflict_with_an_updater(kubectl: Kubectl, ns: str, api: httpx.Client,
                                                     tmp_path: Path) -> None:
    name = unique_name("upd")
    kubectl.ok("create", "-f", write(tmp_path, svc(name, ns)))
    path = write(tmp_path, svc(name, ns, selector="mine"), name="mine.yaml")
    refused = kubectl("apply", "--server-side", "--field-manager=ci", "-f", path).failed()
    entry = next(e for e in stored(api, ns, name)["metadata"]["managedFields"] if e["manager"] == "kubectl-create")
    assert refused.stderr.startswith(
        f'error: Apply failed with 1 conflict: conflict with "kubectl-create" using v1 at {entry["time"]}: '
        ".spec.selector\n"), refused.stderr
    resp = api.patch(ns_path("services", ns, name), params={"fieldManager": "ci"},
                     content=json.dumps(svc(name, ns, selector="mine")),
                     headers={"Content-Type": "application/apply-patch+yaml"})
    assert resp.status_code == 409
    assert resp.json()["reason"] == "Conflict"
    assert resp.json()["details"] == {"causes": [{
        "reason": "FieldManagerConflict", "message": f'conflict with "kubectl-create" using v1 at {entry["time"]}',
        "field": ".spec.selector"}]}


@pytest.mark.parametrize("version", VERSIONS)
def test_client_side_then_server_side_apply_keeps_the_spec(kubectl_for: Callable[[str], Kubectl], ns: str,
                                                           api: httpx.Client, tmp_path: Path, version: str) -> None:
    """kubectl 1.29+ follows a server-side apply of a client-side-applied object with a second apply
    (fieldManager=kubectl-last-applied) of the annotation alone, then migrates managedFields: neither
    may lose the spec."""
    kubectl = kubectl_for(version)
    name = unique_name("mig")
    kubectl.ok("apply", "-f", write(tmp_path, svc(name, ns)))
    path = write(tmp_path, svc(name, ns, selector="next"), name="next.yaml")
    result = kubectl("apply", "--server-side", "-f", path).ok()
    assert result.stdout == f"service/{name} serverside-applied\n"
    assert "Warning" not in result.stderr, result.stderr
    obj = stored(api, ns, name)
    assert obj["spec"]["selector"] == {"app": "next"}
    assert [(p["port"], p["targetPort"]) for p in obj["spec"]["ports"]] == [(80, 8080)]
    managers = {(e["manager"], e["operation"]) for e in obj["metadata"]["managedFields"]}
    assert ("kubectl", "Apply") in managers
    last = json.loads(obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])
    assert last["spec"]["selector"] == {"app": "next"}


# --- create, replace, edit ---------------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
def test_create_and_replace(kubectl_for: Callable[[str], Kubectl], ns: str, api: httpx.Client, tmp_path: Path,
                            version: str) -> None:
    kubectl = kubectl_for(version)
    name = unique_name("cr")
    path = write(tmp_path, svc(name, ns))
    assert kubectl.ok("create", "-f", path) == f"service/{name} created\n"
    dup = kubectl("create", "-f", path).failed()
    assert dup.stderr == f'Error from server (AlreadyExists): error when creating "{path}": services "{name}" ' \
                         "already exists\n"
    assert kubectl.ok("replace", "-f", write(tmp_path, svc(name, ns, selector="v2"), name="v2.yaml")) == \
        f"service/{name} replaced\n"
    current = stored(api, ns, name)
    assert current["spec"]["selector"] == {"app": "v2"}
    stale = svc(name, ns, selector="v3")
    stale["metadata"]["resourceVersion"] = str(int(current["metadata"]["resourceVersion"]) - 1)
    stale_path = write(tmp_path, stale, name="stale.yaml")
    conflict = kubectl("replace", "-f", stale_path).failed()
    assert conflict.stderr == (f'Error from server (Conflict): error when replacing "{stale_path}": Operation '
                               f'cannot be fulfilled on services "{name}": the object has been modified; please '
                               "apply your changes to the latest version and try again\n")
    assert stored(api, ns, name)["spec"]["selector"] == {"app": "v2"}


def test_edit(kubectl: Kubectl, ns: str, api: httpx.Client, tmp_path: Path) -> None:
    name = unique_name("ed")
    kubectl.ok("create", "-f", write(tmp_path, svc(name, ns)))
    editor = tmp_path / "editor.py"
    editor.write_text("import sys\npath = sys.argv[1]\ntext = open(path).read()\n"
                      "open(path, 'w').write(text.replace('app: web', 'app: edited'))\n")
    env = {"KUBE_EDITOR": f"{sys.executable} {editor}"}
    assert kubectl.ok("edit", "svc", name, "-n", ns, env=env) == f"service/{name} edited\n"
    assert stored(api, ns, name)["spec"]["selector"] == {"app": "edited"}
    entry = {e["manager"]: e for e in stored(api, ns, name)["metadata"]["managedFields"]}["kubectl-edit"]
    assert entry["fieldsV1"] == {"f:spec": {"f:selector": {}}}
    cancelled = kubectl("edit", "svc", name, "-n", ns, env={"KUBE_EDITOR": "true"}).ok()
    assert cancelled.stderr == "Edit cancelled, no changes made.\n"


# --- label, annotate, patch, delete ------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
def test_label_annotate_patch_delete(kubectl_for: Callable[[str], Kubectl], ns: str, api: httpx.Client,
                                     tmp_path: Path, version: str) -> None:
    kubectl = kubectl_for(version)
    name = unique_name("lp")
    kubectl.ok("create", "-f", write(tmp_path, svc(name, ns, labels={"app": "web"})))
    assert kubectl.ok("label", "svc", name, "-n", ns, "tier=fe") == f"service/{name} labeled\n"
    refused = kubectl("label", "svc", name, "-n", ns, "app=other").failed()
    assert refused.stderr == "error: 'app' already has a value (web), and --overwrite is false\n"
    assert kubectl.ok("label", "svc", name, "-n", ns, "app=other", "--overwrite") == f"service/{name} labeled\n"
    assert kubectl.ok("label", "svc", name, "-n", ns, "tier-") == f"service/{name} unlabeled\n"
    assert kubectl.ok("annotate", "svc", name, "-n", ns, "owner=team-a") == f"service/{name} annotated\n"
    meta = stored(api, ns, name)["metadata"]
    assert (meta["labels"], meta["annotations"]) == ({"app": "other"}, {"owner": "team-a"})

    # Strategic merge (the default): ports merge by port. Merge patch: the list is replaced.
    assert kubectl.ok("patch", "svc", name, "-n", ns, "-p", '{"spec":{"ports":[{"name":"https","port":443}]}}') \
        == f"service/{name} patched\n"
    assert [p["port"] for p in stored(api, ns, name)["spec"]["ports"]] == [443, 80]
    assert kubectl.ok("patch", "svc", name, "-n", ns, "--type=merge", "-p",
                      '{"spec":{"ports":[{"name":"http","port":80}]}}') == f"service/{name} patched\n"
    assert [p["port"] for p in stored(api, ns, name)["spec"]["ports"]] == [80]
    assert kubectl.ok("patch", "svc", name, "-n", ns, "--type=json", "-p",
                      '[{"op":"replace","path":"/spec/selector/app","value":"j"}]') == f"service/{name} patched\n"
    assert stored(api, ns, name)["spec"]["selector"] == {"app": "j"}
    assert kubectl.ok("patch", "svc", name, "-n", ns, "-p", '{"spec":{"selector":{"app":"j"}}}') == \
        f"service/{name} patched (no change)\n"
    failed = kubectl("patch", "svc", name, "-n", ns, "--type=json", "-p",
                     '[{"op":"test","path":"/spec/type","value":"NodePort"}]').failed()
    # kube-apiserver's 422 for a failed JSON patch has one cause without a field, which kubectl prints so.
    assert failed.stderr == "The request is invalid: : testing value /spec/type failed: test failed\n"

    assert kubectl.ok("delete", "svc", name, "-n", ns) == f'service "{name}" deleted\n'
    assert api.get(ns_path("services", ns, name)).status_code == 404
    missing = kubectl("delete", "svc", name, "-n", ns).failed()
    assert missing.stderr == f'Error from server (NotFound): services "{name}" not found\n'


@pytest.mark.parametrize("version", VERSIONS)
def test_dry_run_server_persists_nothing(kubectl_for: Callable[[str], Kubectl], ns: str, api: httpx.Client,
                                         tmp_path: Path, version: str) -> None:
    kubectl = kubectl_for(version)
    name = unique_name("dry")
    path = write(tmp_path, svc(name, ns))
    assert kubectl.ok("create", "-f", path, "--dry-run=server") == f"service/{name} created (server dry run)\n"
    assert kubectl.ok("apply", "-f", path, "--dry-run=server") == f"service/{name} created (server dry run)\n"
    assert kubectl.ok("apply", "--server-side", "-f", path, "--dry-run=server") == \
        f"service/{name} serverside-applied (server dry run)\n"
    assert api.get(ns_path("services", ns, name)).status_code == 404
    kubectl.ok("create", "-f", path)
    before = stored(api, ns, name)
    assert kubectl.ok("label", "svc", name, "-n", ns, "x=y", "--dry-run=server") == \
        f"service/{name} labeled (server dry run)\n"
    # kubectl patch does not mark its output as a dry run; the server must still not persist it.
    assert kubectl.ok("patch", "svc", name, "-n", ns, "-p", '{"spec":{"selector":{"app":"z"}}}',
                      "--dry-run=server") == f"service/{name} patched\n"
    assert kubectl.ok("delete", "svc", name, "-n", ns, "--dry-run=server") == \
        f'service "{name}" deleted (server dry run)\n'
    after = stored(api, ns, name)
    assert after == before
    ns_name = unique_name("drns")
    assert kubectl.ok("create", "namespace", ns_name, "--dry-run=server") == \
        f"namespace/{ns_name} created (server dry run)\n"
    assert api.get(f"{CORE}/namespaces/{ns_name}").status_code == 404


def test_server_side_apply_no_op_and_a_conflict_with_kubectl_scale(kubectl: Kubectl, ns: str, api: httpx.Client,
                                                                    tmp_path: Path) -> None:
    name = unique_name("sdep")
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
                  "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                           "template": {"metadata": {"labels": {"app": name}},
                                        "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}}
    path = write(tmp_path, deployment)
    path_of = ns_path("deployments", ns, name, group="apps/v1")
    kubectl.ok("apply", "--server-side", "-f", path)
    before = api.get(path_of).json()["metadata"]["resourceVersion"]
    assert kubectl.ok("apply", "--server-side", "-f", path) == f"deployment.apps/{name} serverside-applied\n"
    assert api.get(path_of).json()["metadata"]["resourceVersion"] == before  # nothing changed, nothing written
    # kubectl scale writes spec.replicas through the scale subresource; it owns it from then on.
    kubectl.ok("scale", "deployment", name, "-n", ns, "--replicas=4")
    refused = kubectl("apply", "--server-side", "-f", path).failed()
    first = refused.stderr.splitlines()[0]
    assert re.fullmatch(r'error: Apply failed with 1 conflict: conflict with "kubectl[.0-9]*" with subresource '
                        r'"scale" using apps/v1 at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ: \.spec\.replicas', first), first
    assert api.get(path_of).json()["spec"]["replicas"] == 4


@pytest.mark.parametrize("version", VERSIONS)
def test_diff(kubectl_for: Callable[[str], Kubectl], ns: str, tmp_path: Path, version: str) -> None:
    """kubectl diff asks the server for the result of an apply in dry-run, then diffs it locally."""
    kubectl = kubectl_for(version)
    name = unique_name("diff")
    path = write(tmp_path, svc(name, ns))
    kubectl.ok("apply", "-f", path)
    assert kubectl("diff", "-f", path).ok().stdout == ""
    changed = write(tmp_path, svc(name, ns, selector="next"), name="next.yaml")
    result = kubectl("diff", "-f", changed)
    assert result.returncode == 1, result.stderr
    hunks = [line for line in result.stdout.splitlines() if line.startswith(("-", "+")) and
             not line.startswith(("---", "+++"))]
    assert ("-    app: web" in hunks and "+    app: next" in hunks), result.stdout
    assert kubectl("diff", "-f", path).ok().stdout == ""  # the dry run persisted nothing


@pytest.mark.parametrize("version", VERSIONS)
def test_diff_of_an_object_made_by_server_side_apply_is_empty(kubectl_for: Callable[[str], Kubectl], ns: str,
                                                               tmp_path: Path, version: str) -> None:
    """kubectl's client-side diff of an object without a last-applied annotation sends `annotations: {}` in
    its dry-run patch; kube's structs drop the empty map (omitempty), so there is nothing to show."""
    kubectl = kubectl_for(version)
    name = unique_name("ssadiff")
    path = write(tmp_path, svc(name, ns))
    kubectl.ok("apply", "--server-side", "-f", path)
    assert kubectl("diff", "-f", path).ok().stdout == ""
    assert kubectl("diff", "--server-side", "-f", path).ok().stdout == ""
