"""A container's environment and command line, as kubelet builds them (pkg/kubelet/kubelet_pods.go,
makeEnvironmentVariables; pkg/kubelet/envvars; third_party/forked/golang/expansion). Pure: the pod, the
container and the objects they name come in, the variables go out; no clock, no API calls.

Order of precedence, kubelet's: `envFrom` sources in order (a later key wins), then `env` in order (a
`value` may name earlier variables and the Service variables as ``$(VAR)``; a `valueFrom` is taken as
is), then the Service variables not already set, then HOSTNAME and PATH as the runtime adds them (the
image's config would give PATH; kubelab has no images, so containerd's default is used). A missing
ConfigMap, Secret or key that is not optional is an `EnvError` with kubelet's message, reported as the
container's CreateContainerConfigError.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubelab import quantity

# containerd's default PATH when the image sets none (oci.WithDefaultPathEnv).
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The Services of the default namespace every pod gets variables for, enableServiceLinks or not.
MASTER_SERVICES = ("kubernetes",)


class EnvError(ValueError):
    """A variable could not be resolved; the message is kubelet's."""


def expand(text: str, *mappings: Mapping[str, str]) -> str:
    """kubelet's $(VAR) expansion: a defined VAR is replaced, an undefined one left as written, ``$$``
    is one ``$``, any other ``$`` stays. Worked example: ``"$(A)-$$(A)-$(B"`` with A=1 -> ``"1-$(A)-$(B"``."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch != "$" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "$":
            out.append("$")
            i += 2
        elif nxt == "(":
            end = text.find(")", i + 2)
            if end < 0:
                out.append(text[i:])  # unterminated: the rest as written
                break
            name = text[i + 2:end]
            for mapping in mappings:
                if name in mapping:
                    out.append(mapping[name])
                    break
            else:
                out.append(text[i:end + 1])
            i = end + 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _env_name(name: str) -> str:
    return name.upper().replace("-", "_")


def service_env(services: Sequence[Mapping[str, Any]], namespace: str, *, enable_links: bool = True
                ) -> dict[str, str]:
    """The Service variables kubelet injects (getServiceEnvVarMap + envvars.FromServices): for the pod's
    namespace's Services when enableServiceLinks, and always for `kubernetes` in default."""
    chosen: dict[str, Mapping[str, Any]] = {}
    for svc in services:
        meta, spec = svc.get("metadata") or {}, svc.get("spec") or {}
        ip = spec.get("clusterIP") or ""
        if ip in ("", "None") or not spec.get("ports"):
            continue
        name, ns = meta.get("name") or "", meta.get("namespace") or ""
        if ns == "default" and name in MASTER_SERVICES:
            chosen.setdefault(name, svc)
        elif ns == namespace and enable_links:
            chosen[name] = svc
    env: dict[str, str] = {}
    for name in sorted(chosen):
        spec = chosen[name]["spec"]
        ip, ports = spec["clusterIP"], spec["ports"]
        prefix = _env_name(name)
        env[f"{prefix}_SERVICE_HOST"] = ip
        env[f"{prefix}_SERVICE_PORT"] = str(ports[0].get("port"))
        for port in ports:
            if port.get("name"):
                env[f"{prefix}_SERVICE_PORT_{_env_name(port['name'])}"] = str(port.get("port"))
        host = f"[{ip}]" if ":" in ip else ip
        first = ports[0]
        env[f"{prefix}_PORT"] = f"{(first.get('protocol') or 'TCP').lower()}://{host}:{first.get('port')}"
        for port in ports:
            proto = (port.get("protocol") or "TCP")
            link = f"{prefix}_PORT_{port.get('port')}_{proto.upper()}"
            env[link] = f"{proto.lower()}://{host}:{port.get('port')}"
            env[f"{link}_PROTO"] = proto.lower()
            env[f"{link}_PORT"] = str(port.get("port"))
            env[f"{link}_ADDR"] = ip
    return env


def field_ref(pod: Mapping[str, Any], path: str, *, pod_ip: str, host_ip: str) -> str:
    """fieldRef as the downward API resolves it (pkg/fieldpath plus the fields kubelet fills itself)."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    if path.startswith(("metadata.labels[", "metadata.annotations[")):
        which, _, key = path.partition("[")
        key = key.rstrip("]").strip("'\"")
        values = meta.get(which.split(".")[1]) or {}
        return str(values.get(key, ""))
    simple = {
        "metadata.name": meta.get("name"), "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"), "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"), "status.hostIP": host_ip,
        "status.hostIPs": host_ip, "status.podIP": pod_ip, "status.podIPs": pod_ip,
    }
    if path in ("metadata.labels", "metadata.annotations"):
        values = meta.get(path.split(".")[1]) or {}
        return "\n".join(f'{k}="{v}"' for k, v in sorted(values.items()))
    if path not in simple:
        raise EnvError(f"unsupported fieldRef: {path}")
    return str(simple[path] or "")


def resource_value(container: Mapping[str, Any], resource: str, divisor: str | None,
                   allocatable: Mapping[str, str]) -> str:
    """resourceFieldRef (pkg/api/v1/resource ExtractContainerResourceValue): the value divided by the
    divisor, rounded up; an unset limit is the node's allocatable, an unset request 0 (cpu requests
    default to the limit by API defaulting, which is applied before the pod is stored)."""
    kind, _, name = resource.partition(".")
    values = ((container.get("resources") or {}).get(kind) or {})
    text = values.get(name)
    if text is None and kind == "limits":
        text = allocatable.get(name)
    text = str(text) if text is not None else "0"
    if name == "cpu":
        div = quantity.milli_value(divisor or "1") or 1
        millis = quantity.milli_value(text)
        return str(-(-millis // div))
    div = quantity.value(divisor or "1") or 1
    return str(-(-quantity.value(text) // div))


def container_env(pod: Mapping[str, Any], container: Mapping[str, Any], *,
                  config_maps: Mapping[str, Mapping[str, Any] | None],
                  secrets: Mapping[str, Mapping[str, Any] | None],
                  services: Sequence[Mapping[str, Any]], pod_ip: str, host_ip: str, hostname: str,
                  allocatable: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment the container's process starts with. `config_maps`/`secrets` map the names the
    container refers to onto the objects read from the API (None: not found); a Secret's data is base64,
    decoded here."""
    import base64

    namespace = (pod.get("metadata") or {}).get("namespace") or "default"
    spec = pod.get("spec") or {}
    svc_env = service_env(services, namespace, enable_links=spec.get("enableServiceLinks", True) is not False)

    def source_data(kind: str, name: str, optional: bool) -> dict[str, str] | None:
        objects = config_maps if kind == "configmap" else secrets
        obj = objects.get(name)
        if obj is None:
            if optional:
                return None
            raise EnvError(f'{kind} "{name}" not found')
        if kind == "configmap":
            data = {k: str(v) for k, v in (obj.get("data") or {}).items()}
            data.update({k: base64.b64decode(v).decode("utf-8", "replace")
                         for k, v in (obj.get("binaryData") or {}).items()})
            return data
        return {k: base64.b64decode(v).decode("utf-8", "replace") for k, v in (obj.get("data") or {}).items()}

    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        prefix = source.get("prefix") or ""
        ref = source.get("configMapRef") or source.get("secretRef") or {}
        kind = "configmap" if source.get("configMapRef") is not None else "secret"
        data = source_data(kind, ref.get("name") or "", bool(ref.get("optional")))
        for key, value in (data or {}).items():
            env[prefix + key] = value
    for var in container.get("env") or []:
        name = var.get("name") or ""
        value_from = var.get("valueFrom")
        if var.get("value") not in (None, "") or not value_from:
            env[name] = expand(str(var.get("value") or ""), env, svc_env)
            continue
        if "fieldRef" in value_from:
            env[name] = field_ref(pod, value_from["fieldRef"].get("fieldPath") or "", pod_ip=pod_ip, host_ip=host_ip)
        elif "resourceFieldRef" in value_from:
            ref = value_from["resourceFieldRef"]
            target = container
            if ref.get("containerName"):
                target = next((c for c in spec.get("containers") or [] if c.get("name") == ref["containerName"]),
                              container)
            env[name] = resource_value(target, ref.get("resource") or "", ref.get("divisor"), allocatable or {})
        else:
            kind = "configmap" if "configMapKeyRef" in value_from else "secret"
            ref = value_from.get("configMapKeyRef") or value_from.get("secretKeyRef") or {}
            optional = bool(ref.get("optional"))
            data = source_data(kind, ref.get("name") or "", optional)
            if data is None:
                continue
            key = ref.get("key") or ""
            if key not in data:
                if optional:
                    continue
                what = "ConfigMap" if kind == "configmap" else "Secret"
                raise EnvError(f"couldn't find key {key} in {what} {namespace}/{ref.get('name')}")
            env[name] = data[key]
    for key, value in svc_env.items():
        env.setdefault(key, value)
    env.setdefault("HOSTNAME", hostname)
    env.setdefault("PATH", DEFAULT_PATH)
    return env


def command_line(container: Mapping[str, Any], env: Mapping[str, str]) -> list[str] | None:
    """command + args with $(VAR) expanded (kubelet's ExpandContainerCommandAndArgs); None when the
    container has no command (kubelab then runs its built-in server, the stand-in for an image's
    entrypoint). `args` alone would be passed to the image's entrypoint; with no image, they run as the
    command."""
    command = [expand(str(a), env) for a in container.get("command") or []]
    args = [expand(str(a), env) for a in container.get("args") or []]
    argv = command + args
    return argv or None


def pod_hostname(pod: Mapping[str, Any]) -> str:
    """kubelet's GeneratePodHostNameAndDomain: spec.hostname, else the pod's name cut to 63 characters
    (with any trailing '-' or '.' removed)."""
    spec, meta = pod.get("spec") or {}, pod.get("metadata") or {}
    if spec.get("hostname"):
        return str(spec["hostname"])
    return str(meta.get("name") or "")[:63].rstrip("-.")
