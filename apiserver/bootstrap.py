"""What kube-apiserver creates for itself at start: the system namespaces, the `kubernetes` ServiceCIDR for its
service range, the `kubernetes` Service, one "Local" APIService per group version it serves, and the
bootstrap RBAC policy (bootstrappolicy.py), reconciled as kube's ensureInitialRoles/reconciliation does it
(a bootstrap binding whose roleRef was changed is deleted and created again: roleRef is immutable).

The `kubernetes` Service in `default` gets the first address of the service range (10.96.0.1) and
port 443 (https); its Endpoints and EndpointSlice point at the address the API server serves on, and
the API server keeps them (the Service has no selector, so no controller touches them).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from kubelab import kinds, timeutil, wellknown
from kubelab.kinds import ResourceType
from kubelab.selectors import parse_field_selector, parse_label_selector

from . import bootstrappolicy, errors
from .registry import Registry

log = logging.getLogger(__name__)

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# kube-apiserver's apiVersionPriorities (group, version priority): where a group sorts in discovery. As in
# kube, a served group version missing here gets no APIService. metrics.k8s.io is metrics-server's own
# registration (100, 100); kubelab serves that group itself, so its APIService is Local too.
API_VERSION_PRIORITIES = {
    "v1": (18000, 1), "apps/v1": (17800, 15), "events.k8s.io/v1": (17750, 15),
    "authentication.k8s.io/v1": (17700, 15), "authorization.k8s.io/v1": (17600, 15), "autoscaling/v1": (17500, 15),
    "batch/v1": (17400, 15), "certificates.k8s.io/v1": (17300, 15), "networking.k8s.io/v1": (17200, 15),
    "policy/v1": (17100, 15), "rbac.authorization.k8s.io/v1": (17000, 15), "storage.k8s.io/v1": (16800, 15),
    "apiextensions.k8s.io/v1": (16700, 15), "admissionregistration.k8s.io/v1": (16700, 15),
    "scheduling.k8s.io/v1": (16600, 15), "coordination.k8s.io/v1": (16500, 15), "node.k8s.io/v1": (16300, 15),
    "discovery.k8s.io/v1": (16200, 15), "flowcontrol.apiserver.k8s.io/v1": (16100, 21),
    "metrics.k8s.io/v1beta1": (100, 100),
}
AUTOMANAGED_LABEL = "kube-aggregator.kubernetes.io/automanaged"


async def bootstrap(registry: Registry, *, advertise_ip: str, port: int, service_ip: str,
                    group_versions: Iterable[str] = (), service_cidr: str | None = None,
                    endpoints: bool = True) -> None:
    """`endpoints=False`: the Service's endpoints are left to the endpoint reconciler (endpointreconciler.py),
    which kube-apiserver runs beside these hooks."""
    for name in SYSTEM_NAMESPACES:
        await registry.ensure(kinds.NAMESPACES, {"metadata": {"name": name}})
    if service_cidr is not None:
        await _reconcile_service_cidr(registry, service_cidr)
    await _reconcile_service(registry, service_ip, port)
    if endpoints:
        await _reconcile_endpoints(registry, advertise_ip, port)
    await _reconcile_apiservices(registry, group_versions)
    await reconcile_rbac(registry)


def local_apiservice(group_version: str) -> dict[str, Any] | None:
    """The APIService kube-apiserver's autoregister controller keeps for a group version it serves itself
    (`v1.` for the core group, `v1.apps`, ...), with the status its availability controller gives a local
    one; None for a group version without a priority."""
    if group_version not in API_VERSION_PRIORITIES:
        return None
    group, _, version = group_version.rpartition("/")
    group_priority, version_priority = API_VERSION_PRIORITIES[group_version]
    return {"metadata": {"name": f"{version}.{group}", "labels": {AUTOMANAGED_LABEL: "onstart"}},
            "spec": {"group": group, "version": version, "groupPriorityMinimum": group_priority,
                     "versionPriority": version_priority}}


async def _reconcile_apiservices(registry: Registry, group_versions: Iterable[str]) -> None:
    """autoregister's sync on start: create the missing ones, put back a changed spec, delete the
    `onstart` ones whose group this server no longer serves; then mark them Available (Local)."""
    wanted = {body["metadata"]["name"]: body for gv in dict.fromkeys(group_versions)
              if (body := local_apiservice(gv)) is not None}
    for stored in (await registry.list(kinds.APISERVICES, None, parse_label_selector(None),
                                              parse_field_selector(None)))[0]:
        name = stored["metadata"]["name"]
        if name not in wanted and (stored["metadata"].get("labels") or {}).get(AUTOMANAGED_LABEL) == "onstart":
            try:
                await registry.delete(kinds.APISERVICES, None, name)
            except errors.StatusError as exc:
                if exc.code != 404:
                    raise
    for name, body in wanted.items():
        try:
            await registry.create(kinds.APISERVICES, None, body)
        except errors.StatusError as exc:
            if exc.code != 409:
                raise

        def local(current: dict[str, Any], body: dict[str, Any] = body) -> dict[str, Any]:
            if current.get("spec") == body["spec"]:
                return current
            return {**current, "spec": body["spec"]}

        await registry.guaranteed_update(kinds.APISERVICES, None, name, local)

        def available(current: dict[str, Any]) -> dict[str, Any]:
            conditions = (current.get("status") or {}).get("conditions") or []
            if any(c.get("type") == "Available" and c.get("status") == "True" and c.get("reason") == "Local"
                   for c in conditions):
                return current
            return {**current, "status": {"conditions": [{
                "type": "Available", "status": "True", "lastTransitionTime": timeutil.rfc3339(),
                "reason": "Local", "message": "Local APIServices are always available"}]}}

        await registry.guaranteed_update(kinds.APISERVICES, None, name, available, subresource="status")


DEFAULT_SERVICE_CIDR = "kubernetes"


async def _reconcile_service_cidr(registry: Registry, cidr: str) -> None:
    """kube-apiserver's default ServiceCIDR controller: a `kubernetes` ServiceCIDR for the
    --service-cluster-ip-range, and Ready=True (no reason, its message) once it matches this server's
    range. One whose CIDRs differ (another server's range) is left alone and not marked Ready, as
    upstream only warns then."""
    try:
        await registry.create(kinds.SERVICECIDRS, None, {"metadata": {"name": DEFAULT_SERVICE_CIDR},
                                                         "spec": {"cidrs": [cidr]}})
    except errors.StatusError as exc:
        if exc.code != 409:
            raise

    def ready(current: dict[str, Any]) -> dict[str, Any]:
        if (current.get("spec") or {}).get("cidrs") != [cidr]:
            return current
        conditions = (current.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            return current
        others = [c for c in conditions if c.get("type") != "Ready"]
        return {**current, "status": {"conditions": [*others, {
            "type": "Ready", "status": "True", "lastTransitionTime": timeutil.rfc3339(), "reason": "",
            "message": "Kubernetes default Service CIDR is ready"}]}}

    await registry.guaranteed_update(kinds.SERVICECIDRS, None, DEFAULT_SERVICE_CIDR, ready, subresource="status")


async def _reconcile_service(registry: Registry, service_ip: str, port: int) -> None:
    """Create the `kubernetes` Service, or put back its ports and type when they differ from this
    server's (kube-apiserver's CreateOrUpdateMasterServiceIfNeeded): an API server restarted on
    another port must not leave 10.96.0.1:443 pointing at the old one."""
    ports = [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}]
    try:
        await registry.create(kinds.SERVICES, "default", {
            "metadata": {"name": "kubernetes", "namespace": "default",
                         "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {"type": "ClusterIP", "clusterIP": service_ip, "sessionAffinity": "None", "ports": ports}})
        return
    except errors.StatusError as exc:
        if exc.code != 409:
            raise

    def fix(current: dict[str, Any]) -> dict[str, Any]:
        spec = current.get("spec") or {}
        if spec.get("type") == "ClusterIP" and spec.get("ports") == ports:
            return current  # unchanged: the store writes nothing
        return {**current, "spec": {**spec, "type": "ClusterIP", "ports": ports}}

    await registry.guaranteed_update(kinds.SERVICES, "default", "kubernetes", fix)


async def _reconcile_endpoints(registry: Registry, ip: str, port: int) -> None:
    labels = {"endpointslice.kubernetes.io/skip-mirror": "true"}
    endpoints: dict[str, Any] = {
        "metadata": {"name": "kubernetes", "namespace": "default", "labels": labels},
        "subsets": [{"addresses": [{"ip": ip}], "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}]}
    slice_: dict[str, Any] = {
        "metadata": {"name": "kubernetes", "namespace": "default",
                     "labels": {wellknown.SERVICE_NAME: "kubernetes"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [ip], "conditions": {"ready": True}}],
        "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}
    for rt, body in ((kinds.ENDPOINTS, endpoints), (kinds.ENDPOINTSLICES, slice_)):
        try:
            await registry.create(rt, "default", body)
        except errors.StatusError as exc:
            if exc.code != 409:
                raise

            def refresh(current: dict[str, Any], body: dict[str, Any] = body) -> dict[str, Any]:
                return {**current, **{k: v for k, v in body.items() if k != "metadata"}}

            await registry.guaranteed_update(rt, "default", "kubernetes", refresh)


def _union(existing: list[Any], expected: list[Any]) -> list[Any]:
    return existing + [item for item in expected if item not in existing]


def reconciled(current: dict[str, Any], expected: dict[str, Any]) -> dict[str, Any]:
    """reconciliation.computeReconciledRole / computeReconciledRoleBinding: an object whose autoupdate
    annotation is not "false" gets the expected labels and annotations it lacks, the rules (or, for an
    aggregated ClusterRole, the selectors and rules) it lacks, and the subjects it lacks; nothing it has is
    taken away. The same object back when there is nothing to add."""
    meta = current.get("metadata") or {}
    if (meta.get("annotations") or {}).get(bootstrappolicy.AUTOUPDATE) == "false":
        return current
    out = {**current, "metadata": {**meta,
                                   "labels": {**expected["metadata"]["labels"], **(meta.get("labels") or {})},
                                   "annotations": {**expected["metadata"]["annotations"],
                                                   **(meta.get("annotations") or {})}}}
    if "aggregationRule" in expected:
        selectors = (current.get("aggregationRule") or {}).get("clusterRoleSelectors") or []
        out["aggregationRule"] = {"clusterRoleSelectors": _union(
            selectors, expected["aggregationRule"]["clusterRoleSelectors"])}
    if "rules" in expected:
        out["rules"] = _union(current.get("rules") or [], expected["rules"])
    if "subjects" in expected:
        out["subjects"] = _union(current.get("subjects") or [], expected["subjects"])
    return current if out == current else out


def role_ref_changed(current: dict[str, Any], expected: dict[str, Any]) -> bool:
    """computeReconciledRoleBinding's first question: whether the stored binding's roleRef (apiGroup, kind,
    name, compared as Go compares the struct) is another than the bootstrap one."""
    have, want = current.get("roleRef") or {}, expected.get("roleRef") or {}
    return any((have.get(key) or "") != (want.get(key) or "") for key in ("apiGroup", "kind", "name"))


def protected(current: dict[str, Any]) -> bool:
    """`rbac.authorization.kubernetes.io/autoupdate: "false"`: the administrator's own, never reconciled."""
    return ((current.get("metadata") or {}).get("annotations") or {}).get(bootstrappolicy.AUTOUPDATE) == "false"


class _RoleRefChanged(Exception):
    """The binding's roleRef changed between the read and the update: start that binding over."""


RECONCILE_ATTEMPTS = 3  # ReconcileRoleBindingOptions.run gives up past its third attempt


async def _reconcile_binding(registry: Registry, rt: ResourceType, expected: dict[str, Any]) -> None:
    """ReconcileRoleBindingOptions.run: create it; or, since a roleRef is immutable, delete a binding whose
    roleRef is another (with its uid as the precondition, so a binding someone recreated meanwhile is
    not the one deleted) and create the bootstrap one in its place, its subjects and all; or add what it
    lacks. A protected binding is left as it is, whatever its roleRef. Each race (created, deleted or
    recreated meanwhile) starts the binding over, as kube's run(attempts + 1) does."""
    name = expected["metadata"]["name"]
    namespace = expected["metadata"].get("namespace")

    def update(current: dict[str, Any]) -> dict[str, Any]:
        if protected(current):
            return current
        if role_ref_changed(current, expected):
            raise _RoleRefChanged
        return reconciled(current, expected)

    for _ in range(RECONCILE_ATTEMPTS):
        try:
            current = await registry.get(rt, namespace, name)
        except errors.StatusError as exc:
            if exc.code != 404:
                raise
            current = None
        if current is not None and protected(current):
            return
        if current is not None and role_ref_changed(current, expected):
            try:
                await registry.delete(rt, namespace, name, preconditions={"uid": current["metadata"].get("uid")})
            except errors.StatusError as exc:
                if exc.code == 409:
                    continue  # another object under that name now: look again
                if exc.code != 404:
                    raise
            current = None
        if current is None:
            try:
                await registry.create(rt, namespace, expected)
                return
            except errors.StatusError as exc:
                if exc.code != 409:
                    raise
                continue  # created meanwhile: reconcile that one
        try:
            await registry.guaranteed_update(rt, namespace, name, update)
            return
        except _RoleRefChanged:
            continue
        except errors.StatusError as exc:
            if exc.code != 404:
                raise
    log.warning("unable to reconcile %s %s: exceeded maximum attempts", rt.plural, name)


async def reconcile_rbac(registry: Registry) -> None:
    """The bootstrap ClusterRoles, then the ClusterRoleBindings, then the kube-system Roles and RoleBindings
    (ensureInitialRoles' order): created when missing, else reconciled (a binding whose roleRef is another
    is recreated)."""
    roles, bindings = bootstrappolicy.policy()
    local_roles, local_bindings = bootstrappolicy.namespaced()
    for rt, objects in ((kinds.CLUSTERROLES, roles), (kinds.CLUSTERROLEBINDINGS, bindings),
                        (kinds.ROLES, local_roles), (kinds.ROLEBINDINGS, local_bindings)):
        for expected in objects:
            if rt in (kinds.CLUSTERROLEBINDINGS, kinds.ROLEBINDINGS):
                await _reconcile_binding(registry, rt, expected)
                continue
            name = expected["metadata"]["name"]
            namespace = expected["metadata"].get("namespace")
            try:
                await registry.create(rt, namespace, expected)
                continue
            except errors.StatusError as exc:
                if exc.code != 409:
                    raise

            def update(current: dict[str, Any], expected: dict[str, Any] = expected) -> dict[str, Any]:
                return reconciled(current, expected)

            await registry.guaranteed_update(rt, namespace, name, update)
