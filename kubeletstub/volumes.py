"""A pod's volumes, as kubelet's volume manager sets them up (pkg/volume/emptydir, configmap, secret,
downwardapi, projected; pkg/volume/util/atomic_writer.go), under the pod's directory (kubelet's
/var/lib/kubelet/pods/<uid>/volumes/<plugin>/<name>), and the bind mounts that put them in a container.

- emptyDir: a directory; `medium: Memory` a tmpfs mounted on it (in the lab's directory, unmounted when
  the pod goes), shared by the pod's containers.
- configMap, secret, downwardAPI, projected: files written as kubelet's atomic writer does: the payload
  in a hidden timestamped directory, ``..data`` a symlink to it, and each top-level name a symlink
  through ``..data``; modes from `items[].mode`, else `defaultMode` (0644). A missing ConfigMap/Secret
  that is not optional fails the mount (FailedMount, retried); optional ones give an empty volume.
- projected serviceAccountToken: a bound token from the TokenRequest API (`POST .../serviceaccounts/
  <sa>/token`, boundObjectRef the pod, expirationSeconds default 3607), failing the mount while the API
  refuses it, as kubelet does. Tokens are kept as kubelet's token manager keeps them (pkg/kubelet/token):
  one per pod, account, audience and lifetime, asked for again once it is older than 80 % of its
  lifetime (past expiry - 20 % of expirationSeconds, less a jitter of up to 10 s) or than 24 h.
These volumes are always mounted read-only in containers, as kubelet mounts them.

The contents are written when the pod starts, and written again (a new payload, ``..data`` swapped in
one rename, as kubelet's sync does every minute) when a ConfigMap, Secret or the pod's metadata they
come from changed, or a projected token was renewed.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ctypes
import datetime
import os
import posixpath
import random
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubelab import kinds, quantity
from kubelab.client import ApiClient, ApiError, NotFound
from kubelab.models import Container, Pod

from . import envvars
from .runtime import Mount

DEFAULT_MODE = 0o644
TOKEN_EXPIRATION = 3607  # kubelet's default for projected tokens (an hour and a few seconds, as kube's admission)
_PLUGINS = {"emptyDir": "kubernetes.io~empty-dir", "configMap": "kubernetes.io~configmap",
            "secret": "kubernetes.io~secret", "downwardAPI": "kubernetes.io~downward-api",
            "projected": "kubernetes.io~projected"}
_READ_ONLY = ("configMap", "secret", "downwardAPI", "projected")
# kubelet's token manager: a token is renewed past 80 % of its lifetime or 24 h, whichever comes first,
# less a random jitter of up to 10 s (so that a node's pods do not all ask at once).
TOKEN_MAX_TTL = 24 * 3600.0
TOKEN_MAX_JITTER = 10.0


@dataclass(frozen=True)
class IssuedToken:
    """A token the TokenRequest API gave: its text, when it expires, the lifetime it was issued for."""

    token: str
    expiration: datetime.datetime
    expiration_seconds: int


def token_needs_refresh(issued: IssuedToken, now: datetime.datetime, jitter: float = 0.0) -> bool:
    """kubelet's requiresRefresh: older than 24 h, or within 20 % of its lifetime of expiring (both less
    `jitter` seconds)."""
    issued_at = issued.expiration - datetime.timedelta(seconds=issued.expiration_seconds)
    if now > issued_at + datetime.timedelta(seconds=TOKEN_MAX_TTL - jitter):
        return True
    return now > issued.expiration - datetime.timedelta(seconds=issued.expiration_seconds * 20 // 100 + jitter)


def _expiration(status: Mapping[str, Any], seconds: int, now: datetime.datetime) -> datetime.datetime:
    """status.expirationTimestamp of a TokenRequest answer (RFC 3339), else now + the lifetime asked."""
    raw = status.get("expirationTimestamp")
    if isinstance(raw, str):
        with contextlib.suppress(ValueError):
            parsed = datetime.datetime.fromisoformat(raw)
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)
    return now + datetime.timedelta(seconds=seconds)


class MountError(ValueError):
    """A volume could not be set up; the message is kubelet's, for the FailedMount event."""


def volume_kind(volume: Mapping[str, Any]) -> str | None:
    return next((k for k in _PLUGINS if k in volume), None)


def volume_dir(pod_dir: Path, volume: Mapping[str, Any]) -> Path:
    kind = volume_kind(volume) or "unsupported"
    return pod_dir / "volumes" / _PLUGINS.get(kind, kind) / str(volume.get("name"))


def _clean_relative(path: str) -> str | None:
    """A relative path that stays inside the volume (kubelet validates items' paths the same way)."""
    norm = posixpath.normpath(path)
    if not path or path.startswith("/") or norm == ".." or norm.startswith("../") or ".." in path.split("/"):
        return None
    return norm


def write_atomic(target: Path, files: Mapping[str, tuple[bytes, int]]) -> None:
    """kubelet's atomic writer: payload in ``..<timestamp>``, ``..data`` pointing at it, each top-level
    name a symlink through ``..data``; a previous payload is swapped out in one rename, then removed."""
    target.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("..%Y_%m_%d_%H_%M_%S.%f")
    payload = target / stamp
    payload.mkdir()
    for rel, (data, mode) in files.items():
        path = payload / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        path.chmod(mode)
    payload.chmod(0o755)
    data_link = target / "..data"
    old = os.readlink(data_link) if data_link.is_symlink() else None
    tmp = target / "..data_tmp"
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    tmp.symlink_to(stamp)
    os.replace(tmp, data_link)
    for top in {rel.split("/", 1)[0] for rel in files}:
        link = target / top
        if not link.is_symlink():
            link.symlink_to(f"..data/{top}")
    if old and old != stamp:
        shutil.rmtree(target / old, ignore_errors=True)


def _current(target: Path) -> dict[str, tuple[bytes, int]] | None:
    """The payload `write_atomic` last wrote into `target` (None if nothing readable is there)."""
    payload = target / "..data"
    if not payload.is_dir():
        return None
    files = {}
    for path in payload.resolve().rglob("*"):
        if path.is_file():
            files[str(path.relative_to(payload.resolve()))] = (path.read_bytes(), path.stat().st_mode & 0o7777)
    return files


def _items(data: Mapping[str, bytes], items: list[dict[str, Any]] | None, default_mode: int, *,
           optional: bool, what: str) -> dict[str, tuple[bytes, int]]:
    if not items:
        return {key: (value, default_mode) for key, value in data.items()}
    out = {}
    for item in items:
        key, rel = str(item.get("key") or ""), _clean_relative(str(item.get("path") or ""))
        if rel is None:
            raise MountError(f"invalid path {item.get('path')!r} in {what}")
        if key not in data:
            if optional:
                continue
            raise MountError(f"configmap references non-existent config key: {key}" if what.startswith("configmap")
                             else f"references non-existent secret key: {key}")
        item_mode = item.get("mode")
        out[rel] = (data[key], int(item_mode) if item_mode is not None else default_mode)
    return out


class _Wire:
    """A pod's wire form (to_dict), made when first asked for: the one downwardAPI item of every pod's
    token volume, metadata.namespace, is read off the model, and a to_dict per volume setup was a sixth
    of the kubelets' pod syncs in the 50 x 20 density profile."""

    def __init__(self, pod: Pod) -> None:
        self.pod = pod
        self._raw: dict[str, Any] | None = None
        self._containers: dict[str, Mapping[str, Any]] | None = None

    def raw(self) -> dict[str, Any]:
        if self._raw is None:
            self._raw = self.pod.to_dict()
        return self._raw

    def container(self, name: str) -> Mapping[str, Any]:
        if self._containers is None:
            self._containers = {c.get("name") or "": c for c in (self.raw().get("spec") or {}).get("containers") or []}
        return self._containers.get(name) or {}


def _downward(pod: _Wire, items: list[dict[str, Any]], default_mode: int, *, ip: str, host_ip: str,
              allocatable: Mapping[str, str]) -> dict[str, tuple[bytes, int]]:
    out = {}
    meta = pod.pod.metadata
    for item in items or []:
        rel = _clean_relative(str(item.get("path") or ""))
        if rel is None:
            raise MountError(f"invalid path {item.get('path')!r} in downwardAPI volume")
        if item.get("fieldRef"):
            path = item["fieldRef"].get("fieldPath") or ""
            if path in ("metadata.name", "metadata.namespace", "metadata.uid"):
                value = str(getattr(meta, path.removeprefix("metadata.")) or "")
            else:
                value = envvars.field_ref(pod.raw(), path, pod_ip=ip, host_ip=host_ip)
        else:
            ref = item.get("resourceFieldRef") or {}
            value = envvars.resource_value(pod.container(ref.get("containerName") or ""), ref.get("resource") or "",
                                           ref.get("divisor"), allocatable)
        mode = item.get("mode")
        out[rel] = (value.encode(), int(mode if mode is not None else default_mode))
    return out


class VolumeManager:
    """Sets up and tears down the volumes of the pods on one node."""

    def __init__(self, api: ApiClient, *, node_ip: str, allocatable: Mapping[str, str],
                 clock: Callable[[], datetime.datetime] | None = None,
                 jitter: Callable[[], float] | None = None) -> None:
        self.api = api
        self.node_ip = node_ip
        self.allocatable = allocatable
        self.clock = clock or (lambda: datetime.datetime.now(datetime.UTC))
        self.jitter = jitter or (lambda: random.uniform(0, TOKEN_MAX_JITTER))
        # (pod uid, account, audiences, expirationSeconds) -> the token kubelet's token manager caches
        self._tokens: dict[tuple[str, str, tuple[str, ...], int], IssuedToken] = {}
        # path -> the GET of that configMap or secret in flight, which every pod that needs it meanwhile shares
        self._reading: dict[str, asyncio.Future[dict[str, Any] | None]] = {}

    def forget(self, pod_uid: str) -> None:
        """The pod is gone: its tokens with it."""
        for key in [k for k in self._tokens if k[0] == pod_uid]:
            del self._tokens[key]

    async def _get(self, rt: Any, namespace: str, name: str) -> dict[str, Any] | None:
        """The object (None: not found), read from the API server. Pods that need it while a read is on its
        way share that read: the pods a node starts at once all mount kube-root-ca.crt, and a GET each was
        most of their volumes' setup (kubelet's own watch-based manager serves them from one watch)."""
        path = rt.path(namespace, name)
        reading = self._reading.get(path)
        if reading is None:
            reading = self._reading[path] = asyncio.ensure_future(self._read(path))
            reading.add_done_callback(lambda done: self._read_done(path, done))
        return await asyncio.shield(reading)  # a waiter cancelled does not cancel the others' read

    async def _read(self, path: str) -> dict[str, Any] | None:
        try:
            data: dict[str, Any] = await self.api.request("GET", path)
        except NotFound:
            return None
        return data

    def _read_done(self, path: str, done: asyncio.Future[dict[str, Any] | None]) -> None:
        if self._reading.get(path) is done:
            del self._reading[path]
        if not done.cancelled():
            done.exception()  # retrieved: every waiter may have gone, the read's error is theirs to see

    async def _config_data(self, kind: str, namespace: str, name: str, optional: bool) -> dict[str, bytes] | None:
        obj = await self._get(kinds.CONFIGMAPS if kind == "configmap" else kinds.SECRETS, namespace, name)
        if obj is None:
            if optional:
                return None
            raise MountError(f'{kind} "{name}" not found')
        if kind == "configmap":
            data = {k: str(v).encode() for k, v in (obj.get("data") or {}).items()}
            data.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
            return data
        return {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}

    async def _token(self, pod: Pod, source: Mapping[str, Any]) -> bytes:
        """The pod's token for this source: the cached one while it is fresh, else a new one."""
        namespace = pod.metadata.namespace or "default"
        sa = (pod.spec.model_extra or {}).get("serviceAccountName") if pod.spec else None
        sa = sa or "default"
        audiences = [str(source["audience"])] if source.get("audience") else []
        seconds = int(source.get("expirationSeconds") or TOKEN_EXPIRATION)
        key = (pod.metadata.uid or "", sa, tuple(audiences), seconds)
        cached = self._tokens.get(key)
        now = self.clock()
        if cached is not None and not token_needs_refresh(cached, now, self.jitter()):
            return cached.token.encode()
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"audiences": audiences,
                         "expirationSeconds": seconds,
                         "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": pod.metadata.name,
                                            "uid": pod.metadata.uid}}}
        try:
            answer = await self.api.request("POST", kinds.SERVICEACCOUNTS.path(namespace, sa, "token"), body=body)
        except ApiError as exc:
            if cached is not None and now < cached.expiration:
                return cached.token.encode()  # kubelet keeps serving a token that is still valid
            raise MountError(f'failed to fetch token: {exc}') from exc
        status = (answer or {}).get("status") or {}
        token = status.get("token")
        if not token:
            raise MountError("failed to fetch token: the TokenRequest answer has no token")
        issued_seconds = ((answer or {}).get("spec") or {}).get("expirationSeconds")
        self._tokens[key] = IssuedToken(str(token), _expiration(status, seconds, now),
                                        int(issued_seconds) if isinstance(issued_seconds, int) else seconds)
        return str(token).encode()

    async def _files(self, wire: _Wire, volume: Mapping[str, Any], ip: str) -> dict[str, tuple[bytes, int]]:
        pod = wire.pod
        namespace = pod.metadata.namespace or "default"
        kind = volume_kind(volume)
        src = volume.get(kind or "") or {}
        given = src.get("defaultMode")
        mode = int(given) if given is not None else DEFAULT_MODE
        if kind in ("configMap", "secret"):
            name = str(src.get("name") or src.get("secretName") or "")
            what = "configmap" if kind == "configMap" else "secret"
            data = await self._config_data(what, namespace, name, bool(src.get("optional")))
            return _items(data or {}, src.get("items"), mode, optional=bool(src.get("optional")), what=what)
        if kind == "downwardAPI":
            return _downward(wire, src.get("items") or [], mode, ip=ip, host_ip=self.node_ip,
                             allocatable=self.allocatable)
        files: dict[str, tuple[bytes, int]] = {}
        for source in src.get("sources") or []:
            if "configMap" in source or "secret" in source:
                what = "configmap" if "configMap" in source else "secret"
                ref = source.get("configMap") or source.get("secret") or {}
                data = await self._config_data(what, namespace, str(ref.get("name") or ""), bool(ref.get("optional")))
                files.update(_items(data or {}, ref.get("items"), mode, optional=bool(ref.get("optional")), what=what))
            elif "downwardAPI" in source:
                files.update(_downward(wire, (source["downwardAPI"] or {}).get("items") or [], mode, ip=ip,
                                       host_ip=self.node_ip, allocatable=self.allocatable))
            elif "serviceAccountToken" in source:
                token_src = source["serviceAccountToken"] or {}
                rel = _clean_relative(str(token_src.get("path") or "token")) or "token"
                # The token is the pod's credential: 0600 unless the volume says otherwise (kubelet's rule).
                token_mode = mode if src.get("defaultMode") is not None else 0o600
                files[rel] = (await self._token(pod, token_src), token_mode)
        return files

    async def setup(self, pod: Pod, pod_dir: Path, ip: str, *, refresh: bool = False) -> bool:
        """Every volume of the pod in place; raises MountError naming the first that is not. With
        `refresh`, the volumes kubelet keeps up to date (configMap, secret, downwardAPI, projected, whose
        tokens are renewed when due) are written again, where their content changed. Returns whether
        the pod has any such volume."""
        wire = _Wire(pod)
        refreshable = False
        for volume in (pod.spec.volumes if pod.spec else None) or []:
            kind = volume_kind(volume)
            name = volume.get("name")
            if kind is None:
                continue  # hostPath, PVCs...: not kubelab's (the container sees the host's files anyway)
            if kind != "emptyDir":
                refreshable = True
            elif refresh:
                continue
            path = volume_dir(pod_dir, volume)
            if kind == "emptyDir":
                if not path.exists():
                    path.mkdir(parents=True, mode=0o777)
                    path.chmod(0o777)
                    if (volume.get("emptyDir") or {}).get("medium") == "Memory":
                        _mount_tmpfs(path, (volume.get("emptyDir") or {}).get("sizeLimit"))
                continue
            try:
                files = await self._files(wire, volume, ip)
            except MountError as exc:
                raise MountError(f'MountVolume.SetUp failed for volume "{name}" : {exc}') from None
            if not refresh or _current(path) != files:
                write_atomic(path, files)
        return refreshable

    @staticmethod
    def teardown(pod_dir: Path) -> None:
        """Unmount the pod's memory-backed emptyDirs (found on disk, so a restarted kubelet finds them too);
        the files go with the pod's directory."""
        empty_dirs = pod_dir / "volumes" / _PLUGINS["emptyDir"]
        if empty_dirs.is_dir():
            for path in empty_dirs.iterdir():
                if os.path.ismount(path):
                    _umount(path)

    def mounts(self, pod: Pod, container: Container, pod_dir: Path) -> list[Mount]:
        """The bind mounts of `container`'s volumeMounts (subPath resolved inside the volume)."""
        volumes = {v.get("name"): v for v in (pod.spec.volumes if pod.spec else None) or []}
        out = []
        for vm in (container.model_extra or {}).get("volumeMounts") or []:
            volume = volumes.get(vm.get("name"))
            if volume is None or volume_kind(volume) is None:
                continue
            source = volume_dir(pod_dir, volume)
            sub = vm.get("subPath")
            if sub:
                rel = _clean_relative(str(sub))
                if rel is None:
                    raise MountError(f"invalid subPath {sub!r}")
                real = Path(os.path.realpath(source / rel))
                if not str(real).startswith(str(source.resolve()) + "/"):
                    raise MountError(f"subPath {sub!r} leaves the volume")
                if not real.exists() and volume_kind(volume) == "emptyDir":
                    real.mkdir(parents=True, mode=0o777)
                source = real
            read_only = bool(vm.get("readOnly")) or volume_kind(volume) in _READ_ONLY
            out.append(Mount(str(source), str(vm.get("mountPath")), read_only=read_only))
        return out


_libc = ctypes.CDLL(None, use_errno=True)


def _mount_tmpfs(path: Path, size: str | None) -> None:
    options = f"mode=0777,size={quantity.value(size)}" if size else "mode=0777"
    if _libc.mount(b"tmpfs", str(path).encode(), b"tmpfs", ctypes.c_ulong(6), options.encode()) != 0:
        raise MountError(f"mount tmpfs on {path}: {os.strerror(ctypes.get_errno())}")


def _umount(path: Path) -> None:
    _libc.umount2(str(path).encode(), 2)  # MNT_DETACH
