"""A real Docker engine for tests/e2e/test_compose_docker.py, and the host's network put back after it.

`engine()` uses the Docker daemon already running on the machine if one answers; otherwise it starts
`dockerd` itself, on a socket of its own, and stops it by its PID at the end. Docker rewrites the
host's network namespace when it can (FORWARD policy DROP, DOCKER chains, ip_forward=1, docker0), and
other tests on the same machine run their own namespaces beside it. So the dockerd started here
leaves the host's firewall alone (--iptables=false --ip-forward=false --ip-masq=false --bridge=none):
the compose lab needs none of it (its containers talk over the compose network's bridge, the API is
published by docker-proxy, images are built without network), and whatever Docker added anyway is
removed at the end, even on failure, and the host's network is checked to be as it was.

`offline_build()` builds the images with compose/offline-build.sh, the documented way without a
registry; the base image, the .debs, the wheels and Docker's layer cache are kept between runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from composelab import REPO

# What the lab's images are called in the offline build (compose/offline-build.sh, README).
BASE_IMAGE = "kubelab-base:bookworm"
DOCKERD_FLAGS = ("--iptables=false", "--ip-forward=false", "--ip-masq=false", "--bridge=none")
DOCKER_TOOLS = ("dockerd", "docker", "docker-compose", "debootstrap")
STOP_TIMEOUT = 60.0
ENGINE_LOCK = "/run/kubelab-compose-e2e.lock"


class DockerError(RuntimeError):
    """The engine, a build or a compose command failed."""


@dataclass(frozen=True)
class HostNetwork:
    """What Docker may change in the host's network namespace, and only that (other tests on the
    machine may add links of their own meanwhile)."""

    forward_policy: str
    ip_forward: str
    links: frozenset[str]  # docker0 and the compose networks' bridges (br-<network id>)
    chains: frozenset[str]  # "table chain" of Docker's chains (DOCKER, DOCKER-USER, DOCKER-ISOLATION-...)


def _docker_link(name: str) -> bool:
    return name == "docker0" or re.fullmatch(r"br-[0-9a-f]{12}", name) is not None


def host_network() -> HostNetwork:
    chains = set()
    policy = ""
    for table in ("filter", "nat"):
        done = subprocess.run(["iptables", "-w", "-t", table, "-S"], check=True, capture_output=True, text=True)
        for line in done.stdout.splitlines():
            words = line.split()
            if words[:1] == ["-N"] and words[1].startswith("DOCKER"):
                chains.add(f"{table} {words[1]}")
            if words[:2] == ["-P", "FORWARD"] and table == "filter":
                policy = words[2]
    links = frozenset(p.name for p in Path("/sys/class/net").iterdir() if _docker_link(p.name))
    return HostNetwork(policy, Path("/proc/sys/net/ipv4/ip_forward").read_text().strip(), links, frozenset(chains))


def restore_host_network(before: HostNetwork) -> None:
    """Undo what Docker does to a host: FORWARD policy, ip_forward, DOCKER* chains (and the host's
    jumps into them), docker0 and the compose networks' bridges it left."""
    now = host_network()
    if now.forward_policy != before.forward_policy and before.forward_policy:
        subprocess.run(["iptables", "-w", "-P", "FORWARD", before.forward_policy], check=False)
    if now.ip_forward != before.ip_forward:
        Path("/proc/sys/net/ipv4/ip_forward").write_text(before.ip_forward)
    added = {tuple(entry.split()) for entry in now.chains - before.chains}
    for table in sorted({table for table, _ in added}):  # jumps into Docker's chains from the host's first
        rules = subprocess.run(["iptables", "-w", "-t", table, "-S"], check=False, capture_output=True,
                               text=True).stdout
        for rule in rules.splitlines():
            words = shlex.split(rule)
            jumps = {words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-j", "-g")}
            if words[:1] == ["-A"] and (table, words[1]) not in added and {(table, j) for j in jumps} & added:
                subprocess.run(["iptables", "-w", "-t", table, "-D", *words[1:]], check=False)
    for flag in ("-F", "-X"):
        for table, chain in sorted(added):
            subprocess.run(["iptables", "-w", "-t", table, flag, chain], check=False, capture_output=True)
    for link in sorted(now.links - before.links):
        subprocess.run(["ip", "link", "delete", link], check=False, capture_output=True)


@dataclass
class Engine:
    env: dict[str, str]  # DOCKER_HOST and PATH for docker and docker-compose
    started: bool  # by us: stopped by us

    def run(self, argv: Sequence[str], *, check: bool = True, timeout: float = 600,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(list(argv), check=False, capture_output=True, text=True, timeout=timeout,
                              env={**self.env, **(env or {})}, cwd=REPO)
        if check and done.returncode != 0:
            raise DockerError(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
        return done


def missing_tools() -> list[str]:
    return [tool for tool in DOCKER_TOOLS if shutil.which(tool) is None]


def _docker_path() -> str:
    # The engine's own client (docker.io's /usr/bin/docker) before any other docker on PATH, which
    # may speak an API version this engine does not.
    return os.pathsep.join(["/usr/bin", os.environ.get("PATH", "")])


@contextlib.contextmanager
def engine() -> Iterator[Engine]:
    """A Docker engine: the machine's if one runs, else a dockerd of our own, stopped at the end with
    the host's network checked and put back."""
    base_env = {**os.environ, "PATH": _docker_path()}
    # One at a time per machine: two dockerds on one data root (/var/lib/docker, kept for its cache)
    # would fight over containerd's database, and the compose network's subnet is fixed.
    with open(ENGINE_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if subprocess.run(["docker", "info"], check=False, capture_output=True, env=base_env).returncode == 0:
            yield Engine(base_env, started=False)
        else:
            with _own_dockerd(base_env) as eng:
                yield eng


@contextlib.contextmanager
def _own_dockerd(base_env: dict[str, str]) -> Iterator[Engine]:
    before = host_network()
    work = Path(tempfile.mkdtemp(prefix="kubelab-dockerd-"))
    socket = work / "docker.sock"
    env = {**base_env, "DOCKER_HOST": f"unix://{socket}"}
    log = open(work / "dockerd.log", "wb")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen(["dockerd", *DOCKERD_FLAGS, f"--host=unix://{socket}",
                             f"--pidfile={work / 'dockerd.pid'}", f"--exec-root={work / 'exec'}"],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=base_env,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while subprocess.run(["docker", "info"], check=False, capture_output=True, env=env).returncode != 0:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise DockerError(f"dockerd did not come up:\n{(work / 'dockerd.log').read_text()[-3000:]}")
            time.sleep(0.5)
        yield Engine(env, started=True)
    finally:
        try:
            _stop(proc)
        finally:
            log.close()
            restore_host_network(before)
            after = host_network()
            shutil.rmtree(work, ignore_errors=True)
            if after != before:
                raise DockerError(f"the host's network is not as it was: before {before}, after {after}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM dockerd by its PID (it stops its containerd too), SIGKILL if it does not go."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=STOP_TIMEOUT)


def offline_build(docker: Engine) -> float:
    """compose/offline-build.sh with this test's Python (3.11, its pip configuration); seconds taken."""
    start = time.monotonic()
    docker.run(["sh", "compose/offline-build.sh"], env={"PYTHON": sys.executable, "BASE_IMAGE": BASE_IMAGE},
               timeout=3600)
    return time.monotonic() - start
