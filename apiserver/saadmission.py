"""The ServiceAccount admission plugin on pod create (plugin/pkg/admission/serviceaccount).

A pod runs as a service account: `default` unless it names another, which must exist in its namespace,
else kube's 403 (`error looking up service account NS/NAME: serviceaccount "NAME" not found`). Unless
the pod or, when the pod does not say, its account sets `automountServiceAccountToken: false`, the pod
gets the projected volume `kube-api-access-<5 random characters>` (a 3607 s bound token at `token`, the
`kube-root-ca.crt` ConfigMap's `ca.crt`, and the namespace from the downward API; mode 0644) and every
init container and container that does not already mount something at
/var/run/secrets/kubernetes.io/serviceaccount gets it mounted there read-only: field for field and in
kube's order, so the stored pod is the one kube-apiserver stores. The account's imagePullSecrets go to a
pod that has none. Mirror pods are only checked: they may not name an account, a Secret or a token
projection.

`admit_pod` is pure (the account and the random suffix come in); `admit` looks the account up.
"""

from __future__ import annotations

import asyncio
import copy
import random
import secrets
from typing import Any

from kubelab import kinds

from . import errors
from .authz import MIRROR_POD_ANNOTATION, object_name

DEFAULT_SERVICE_ACCOUNT = "default"
VOLUME_PREFIX = "kube-api-access-"
MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_EXPIRATION_SECONDS = 3607  # serviceaccount.WarnOnlyBoundTokenExpirationSeconds
DEFAULT_MODE = 0o644  # v1.ProjectedVolumeSourceDefaultMode, written out explicitly (kubernetes#104464)
DEFAULT_ATTEMPTS = 10
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # names.SimpleNameGenerator's


def random_suffix() -> str:
    return "".join(secrets.choice(_NAME_ALPHABET) for _ in range(5))


def token_volume(name: str) -> dict[str, Any]:
    """The volume kube's admission adds (TokenVolumeSource), keys in the order kube-apiserver writes them."""
    return {"name": name, "projected": {
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION_SECONDS, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace",
                                        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
        ],
        "defaultMode": DEFAULT_MODE}}


def forbidden(pod: dict[str, Any], message: str) -> errors.StatusError:
    """admission.NewForbidden on a pod create: `pods "NAME" is forbidden: MESSAGE`."""
    name = object_name(pod)
    return errors.StatusError(403, "Forbidden", f'pods "{name}" is forbidden: {message}',
                              {"name": name, "kind": "pods"})


def is_mirror(pod: dict[str, Any]) -> bool:
    annotations = (pod.get("metadata") or {}).get("annotations")
    return isinstance(annotations, dict) and MIRROR_POD_ANNOTATION in annotations


def check_mirror(pod: dict[str, Any]) -> None:
    """Validate's rules for mirror pods, whose spec kubelet wrote and admission must not change."""
    spec = pod.get("spec") or {}
    if spec.get("serviceAccountName") or spec.get("serviceAccount"):
        raise forbidden(pod, "a mirror pod may not reference service accounts")
    volumes = [v for v in spec.get("volumes") or [] if isinstance(v, dict)]
    containers = [c for key in ("initContainers", "containers") for c in spec.get(key) or [] if isinstance(c, dict)]
    env_secret = any(isinstance(e, dict) and isinstance(e.get("valueFrom"), dict) and e["valueFrom"].get("secretKeyRef")
                     for c in containers for e in c.get("env") or [])
    env_from_secret = any(isinstance(e, dict) and e.get("secretRef") for c in containers for e in c.get("envFrom") or [])
    projected = [s for v in volumes if isinstance(v.get("projected"), dict)
                 for s in v["projected"].get("sources") or [] if isinstance(s, dict)]
    if (spec.get("imagePullSecrets") or env_secret or env_from_secret or any(v.get("secret") for v in volumes)
            or any(s.get("secret") for s in projected)):
        raise forbidden(pod, "a mirror pod may not reference secrets")
    if any(s.get("serviceAccountToken") for s in projected):
        raise forbidden(pod, "a mirror pod may not use ServiceAccountToken volume projections")


def account_name(pod: dict[str, Any]) -> str:
    """The pod's account: serviceAccountName, else the deprecated serviceAccount (the v1 conversion), else
    `default`."""
    spec = pod.get("spec") or {}
    return str(spec.get("serviceAccountName") or spec.get("serviceAccount") or DEFAULT_SERVICE_ACCOUNT)


def should_automount(pod: dict[str, Any], account: dict[str, Any]) -> bool:
    """shouldAutomount: the pod's preference wins, then the account's, else true."""
    mine = (pod.get("spec") or {}).get("automountServiceAccountToken")
    if isinstance(mine, bool):
        return mine
    theirs = account.get("automountServiceAccountToken")
    return theirs if isinstance(theirs, bool) else True


def admit_pod(pod: dict[str, Any], account: dict[str, Any], *, suffix: str) -> dict[str, Any]:
    """The pod as the plugin leaves it (a copy): its account named, the token volume and mounts added
    when they should be, the account's pull secrets when it has none. `suffix`: the volume name's five
    random characters. Pure."""
    pod = copy.deepcopy(pod)
    spec = pod["spec"]
    name = account_name(pod)
    # v1 carries the account twice: serviceAccountName, and the deprecated serviceAccount set from it.
    spec["serviceAccountName"] = name
    spec["serviceAccount"] = name
    if should_automount(pod, account):
        _mount_token(spec, suffix)
    pull = account.get("imagePullSecrets")
    if not spec.get("imagePullSecrets") and isinstance(pull, list) and pull:
        spec["imagePullSecrets"] = [{"name": p.get("name")} for p in pull if isinstance(p, dict)]
    return pod


def _mount_token(spec: dict[str, Any], suffix: str) -> None:
    """mountServiceAccountToken: reuse a kube-api-access-* volume the pod already has, else make one if
    some container needs it; every container without a mount at MOUNT_PATH gets one."""
    volumes = spec.get("volumes")
    existing = next((v["name"] for v in volumes or [] if isinstance(v, dict) and isinstance(v.get("name"), str)
                     and v["name"].startswith(VOLUME_PREFIX)), None)
    volume_name = existing or VOLUME_PREFIX + suffix
    needs_volume = False
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            if not isinstance(container, dict):
                continue
            mounts = container.get("volumeMounts")
            if not isinstance(mounts, list):
                mounts = None
            if any(isinstance(m, dict) and m.get("mountPath") == MOUNT_PATH for m in mounts or []):
                continue
            container["volumeMounts"] = [*(mounts or []), {"name": volume_name, "readOnly": True,
                                                           "mountPath": MOUNT_PATH}]
            needs_volume = True
    if existing is None and needs_volume:
        spec["volumes"] = [*(volumes if isinstance(volumes, list) else []), token_volume(volume_name)]


async def admit(registry: Any, namespace: str, body: Any, *, getter: Any = None) -> Any:
    """The plugin's Admit for a pod create: the body to go on with, or kube's 403. A body that is no pod
    the decoder would take is left to the registry, which answers it with its decoding error; so is a
    create into a namespace that is missing or terminating (NamespaceLifecycle runs first in kube).
    `getter` (tokengetters.TokenObjectGetter) reads the namespace and the account as kube's plugins read
    them, from the watch cache (their informers' listers) with a live read on a miss; without one, etcd."""
    if not isinstance(body, dict) or not isinstance(body.get("spec"), dict) or not isinstance(
            body.get("metadata") or {}, dict):
        return body
    spec = body["spec"]
    if not all(isinstance(spec.get(k), list | None) for k in ("containers", "initContainers", "volumes")):
        return body
    if is_mirror(body):
        check_mirror(body)
        return body
    # Through the getter, these two reads were two of the five etcd calls of a scheduled pod.
    ns = await _read(registry, getter, kinds.NAMESPACES, None, namespace)
    if ns is None or (ns.get("metadata") or {}).get("deletionTimestamp"):
        return body
    name = account_name(body)
    first = 0
    if getter is not None:
        known = await getter.get(kinds.SERVICEACCOUNTS, namespace, name)
        if known is not None:
            return admit_pod(body, known, suffix=random_suffix())
        first = 1  # not in the cache and not in etcd: that live read was kube's first attempt
    # kube's getServiceAccount: the lister, then live reads. The default account is made by a controller
    # just after its namespace: kube reads it ten times, 100-200 ms apart, before refusing the pod; any
    # other account once.
    for attempt in range(first, DEFAULT_ATTEMPTS if name == DEFAULT_SERVICE_ACCOUNT else 1):
        if attempt:
            await asyncio.sleep(0.1 + random.random() / 10)
        try:
            account = await registry.get(kinds.SERVICEACCOUNTS, namespace, name)
        except errors.StatusError as exc:
            if exc.code != 404:
                raise
            continue
        return admit_pod(body, account, suffix=random_suffix())
    raise forbidden(body, f'error looking up service account {namespace}/{name}: serviceaccount "{name}" not found')


async def _read(registry: Any, getter: Any, rt: kinds.ResourceType, namespace: str | None, name: str
                ) -> dict[str, Any] | None:
    """One object through the getter when there is one, else from etcd; None when it does not exist."""
    if getter is not None:
        found: dict[str, Any] | None = await getter.get(rt, namespace, name)
        return found
    try:
        live: dict[str, Any] = await registry.get(rt, namespace, name)
    except errors.StatusError as exc:
        if exc.code == 404:
            return None
        raise
    return live


__all__ = ["MOUNT_PATH", "admit", "admit_pod", "token_volume"]
