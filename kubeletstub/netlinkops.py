"""The netlink, sysctl and namespace primitives the netns lab is built with (pyroute2, /var/run/netns,
/etc/netns), and the one error they raise. Every function blocks; see netns.py for the threading rules.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import logging
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pyroute2 import IPRoute
from pyroute2 import config as pyroute2_config
from pyroute2 import netns as pyroute2_netns
from pyroute2.netlink.exceptions import NetlinkError

from kubelab.netnsthread import CLONE_NEWNET, LIBC, NETNS_RUN_DIR, run_in_netns
from kubeletstub.podprocess import (
    PodProcessError,
)

from .rtnetlink import Rtnl

log = logging.getLogger(__name__)

# pyroute2 forks short-lived children to open sockets inside namespaces and stops them with SIGTERM.
# A forked child inherits the parent's signal handlers and asyncio's signal wakeup fd, so a SIGTERM
# the child receives would reach the parent's event loop as if the parent had been told to stop.
# With this set, the child resets SIGTERM to its default action first thing after the fork.
pyroute2_config.disable_mp_signal = True

_RT_TABLE_MAIN = 254


class DataplaneError(RuntimeError):
    """A namespace, link, address, route or pod process could not be set up or removed."""


class NetnsExists(DataplaneError):
    pass


@contextlib.contextmanager
def rtnl(netns: str | None) -> Iterator[Any]:
    """An rtnetlink socket inside an existing namespace, or in the current one for None.

    pyroute2 would fork a child to open a socket inside a namespace; a forked copy of a process whose
    gRPC threads (etcd client) are busy sometimes dies of SIGSEGV. A socket belongs to the namespace
    it is created in, whichever thread uses it later, so a throwaway thread enters the namespace,
    opens the netlink socket, and hands its descriptor over."""
    try:
        ipr = IPRoute() if netns is None else IPRoute(fileno=run_in_netns(netns, _netlink_socket_fd))
    except FileNotFoundError:
        raise DataplaneError(f"network namespace {netns} does not exist") from None
    try:
        yield ipr
    finally:
        ipr.close()


@contextlib.contextmanager
def plain_rtnl(netns: str | None) -> Iterator[Rtnl]:
    """rtnl's socket for rtnetlink.Rtnl's few requests, without pyroute2 (the pod wiring path)."""
    try:
        sock = Rtnl() if netns is None else Rtnl(run_in_netns(netns, _netlink_socket_fd))
    except FileNotFoundError:
        raise DataplaneError(f"network namespace {netns} does not exist") from None
    with sock:
        yield sock


def _netlink_socket_fd() -> int:
    import socket

    return socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, 0).detach()  # NETLINK_ROUTE


def create_netns_in_thread(name: str) -> None:
    """`ip netns add NAME` without a fork: a throwaway thread unshares its network namespace and
    pyroute2's attach() bind-mounts it at /var/run/netns/NAME (making the directory a shared mount
    first, as iproute2 does). FileExistsError if the name is taken."""
    import ctypes

    def create() -> None:
        if LIBC.unshare(CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET) failed")
        pyroute2_netns.attach(name, "thread-self", libc=LIBC)

    run_in_netns(None, create)


@contextlib.contextmanager
def netns_fd(netns: str) -> Iterator[int]:
    fd = os.open(os.path.join(NETNS_RUN_DIR, netns), os.O_RDONLY | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def translated(what: str) -> Iterator[None]:
    try:
        yield
    except DataplaneError:
        raise
    except (NetlinkError, OSError, PodProcessError) as exc:
        raise DataplaneError(f"{what}: {exc}") from exc


NETNS_ETC_DIR = "/etc/netns"
NETNS_ETC_FILES = ("resolv.conf", "hosts")


def write_netns_etc(netns: str, filename: str, text: str) -> None:
    """/etc/netns/<netns>/<filename>: `ip netns exec` bind-mounts it over /etc/<filename>."""
    directory = Path(NETNS_ETC_DIR) / netns
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{filename}.tmp"
    tmp.write_text(text)
    os.replace(tmp, directory / filename)


def remove_netns_etc(netns: str) -> None:
    """Remove the files kubelab writes under /etc/netns/<netns>, and the directory once empty. Only our
    namespaces' names reach here (they carry the lab's prefix), so nothing else is touched."""
    if not netns or "/" in netns or netns in (".", ".."):
        return
    directory = Path(NETNS_ETC_DIR) / netns
    for filename in NETNS_ETC_FILES:
        (directory / filename).unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        directory.rmdir()


def netns_exists(name: str) -> bool:
    return os.path.exists(os.path.join(NETNS_RUN_DIR, name))


def remove_netns(name: str) -> bool:
    """Unmount and delete a named namespace; False if it was not there."""
    if not netns_exists(name):
        return False
    try:
        pyroute2_netns.remove(name)
    except FileNotFoundError:
        return False
    return True


def link_index(ipr: Any, ifname: str) -> int:
    found = ipr.link_lookup(ifname=ifname)
    if not found:
        raise DataplaneError(f"no interface {ifname}")
    return int(found[0])


def set_up(ipr: Any, ifname: str) -> None:
    ipr.link("set", index=link_index(ipr, ifname), state="up")


def delete_link(netns: str | None, ifname: str) -> None:
    if netns is not None and not netns_exists(netns):
        return
    with rtnl(netns) as ipr:
        found = ipr.link_lookup(ifname=ifname)
        if found:
            try:
                ipr.link("del", index=found[0])
            except NetlinkError as exc:
                if exc.code != errno.ENODEV:
                    raise


def delete_route(ipr: Any, dst: ipaddress.IPv4Network, oif: int) -> None:
    try:
        ipr.route("del", dst=str(dst), oif=oif)
    except NetlinkError as exc:
        if exc.code != errno.ESRCH:
            raise


def gateway_routes(ipr: Any, oif: int) -> dict[str, str]:
    """Routes in the main table with a gateway on `oif`: exactly the node routes we install."""
    routes: dict[str, str] = {}
    for msg in ipr.route("dump", family=2, table=_RT_TABLE_MAIN):
        gateway = msg.get("gateway")
        if gateway is None or msg.get("oif") != oif or msg["dst_len"] == 0:
            continue
        routes[f"{msg.get('dst')}/{msg['dst_len']}"] = gateway
    return routes


def write_sysctls(netns: str | None, values: Mapping[str, str]) -> None:
    """Write /proc/sys entries as seen from inside `netns` (None: the current namespace), without a
    shell or a subprocess. Entries that already hold the value are left alone, so a container whose
    /proc/sys is read-only but whose runtime set them (compose's `sysctls:`) passes.

    /proc/sys/net resolves to the network namespace of the *thread* that opens it, so a throwaway
    thread enters the namespace (setns affects only the calling thread), writes, and exits; no
    thread that is reused for anything else ever changes namespace.
    """
    def write() -> None:
        for key, value in values.items():
            with open(f"/proc/sys/{key}") as f:
                if f.read().strip() == value:
                    continue
            try:
                with open(f"/proc/sys/{key}", "w") as f:
                    f.write(value)
            except OSError as exc:
                raise OSError(exc.errno, f"cannot set {key.replace('/', '.')}={value} ({exc.strerror}); "
                              "set it for the container (compose `sysctls:`) or run it privileged") from exc

    try:
        run_in_netns(netns, write, name=f"sysctl-{netns}")
    except Exception as exc:
        where = netns if netns is not None else "this network namespace"
        raise DataplaneError(f"sysctls in {where}: {exc}") from exc


def interface_holding(ipr: Any, ip: str) -> tuple[str, int]:
    """(interface name, prefix length) of the IPv4 address `ip` in `ipr`'s namespace."""
    for msg in ipr.get_addr(family=2):
        if (msg.get("local") or msg.get("address")) == ip:
            (link,) = ipr.get_links(msg["index"])
            return str(link.get("ifname")), int(msg["prefixlen"])
    raise DataplaneError(
        f"{ip} is not an address of this network namespace: with the node in the current namespace, "
        "the node IP must be the address of its uplink (e.g. the container's eth0)"
    )
