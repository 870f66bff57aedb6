"""The few rtnetlink requests that wire a pod into its node (a veth pair, addresses, routes, links up), sent
on a plain netlink socket. Everything else in the lab goes through pyroute2; this path runs for every pod,
and pyroute2's cost per request (a generic message codec and an asyncio loop turned per call, holding the
GIL the components' event loop needs) was two thirds of the pod-setup threads' time in a 50-node rollout
(BENCHMARKS.md, "The lab's state file"). Each request waits for the kernel's acknowledgement and raises
OSError with the kernel's errno when it is refused.

The messages are the kernel's (include/uapi/linux/netlink.h, rtnetlink.h, if_link.h, veth.h): a netlink
header, a fixed part (ifinfomsg, ifaddrmsg or rtmsg) and type-length-value attributes padded to 4 bytes.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import struct
from types import TracebackType
from typing import Self

RTM_NEWLINK, RTM_GETLINK, RTM_NEWADDR, RTM_NEWROUTE = 16, 18, 20, 24
NLMSG_ERROR, NLMSG_DONE = 2, 3
NLM_F_REQUEST, NLM_F_ACK, NLM_F_EXCL, NLM_F_CREATE = 0x1, 0x4, 0x200, 0x400
IFF_UP = 0x1
IFLA_IFNAME, IFLA_LINKINFO, IFLA_NET_NS_FD = 3, 18, 28
IFLA_INFO_KIND, IFLA_INFO_DATA = 1, 2
VETH_INFO_PEER = 1
IFA_ADDRESS, IFA_LOCAL = 1, 2
RTA_DST, RTA_OIF, RTA_GATEWAY = 1, 4, 5
RT_TABLE_MAIN = 254
RTPROT_STATIC = 4  # what `ip route` shows as "proto static", as pyroute2 wrote them
RTN_UNICAST = 1
RT_SCOPE_UNIVERSE, RT_SCOPE_LINK = 0, 253
LOOPBACK_INDEX = 1  # lo is ifindex 1 in every network namespace (the kernel's LOOPBACK_IFINDEX)

_HEADER = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, sequence, port
_IFINFO = struct.Struct("=BxHiII")  # ifinfomsg: family, type, index, flags, change
_IFADDR = struct.Struct("=BBBBI")  # ifaddrmsg: family, prefix length, flags, scope, index
_RTMSG = struct.Struct("=BBBBBBBBI")  # rtmsg: family, dst/src length, tos, table, protocol, scope, type, flags
_ATTR = struct.Struct("=HH")  # rtattr: length, type
_ERROR = struct.Struct("=i")


def attr(kind: int, payload: bytes) -> bytes:
    """One attribute, padded to 4 bytes. Pure."""
    length = _ATTR.size + len(payload)
    return _ATTR.pack(length, kind) + payload + b"\0" * (-length % 4)


def _name(ifname: str) -> bytes:
    return ifname.encode() + b"\0"


def _ipv4(address: str) -> bytes:
    return ipaddress.IPv4Address(address).packed


class Rtnl:
    """An rtnetlink socket: `fd` one opened elsewhere (inside another namespace), or a new one in this
    process's namespace. Not for concurrent use."""

    def __init__(self, fd: int | None = None) -> None:
        self._sock = (socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE) if fd is None
                      else socket.socket(fileno=fd))
        self._sock.bind((0, 0))
        self._seq = 0

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def request(self, kind: int, flags: int, body: bytes) -> list[bytes]:
        """Send one request and return the bodies of the kernel's answers before its acknowledgement."""
        self._seq += 1
        seq = self._seq
        self._sock.send(_HEADER.pack(_HEADER.size + len(body), kind, NLM_F_REQUEST | NLM_F_ACK | flags, seq, 0)
                        + body)
        answers: list[bytes] = []
        while True:
            data = self._sock.recv(65536)
            offset = 0
            while offset + _HEADER.size <= len(data):
                length, answer, _, answered, _ = _HEADER.unpack_from(data, offset)
                if length < _HEADER.size:
                    raise OSError(errno.EPROTO, "a truncated netlink message")
                if answered == seq:
                    if answer == NLMSG_ERROR:
                        (code,) = _ERROR.unpack_from(data, offset + _HEADER.size)
                        if code:
                            raise OSError(-code, os.strerror(-code))
                        return answers
                    if answer == NLMSG_DONE:
                        return answers
                    answers.append(data[offset + _HEADER.size:offset + length])
                offset += (length + 3) & ~3

    def link_index(self, ifname: str) -> int:
        """The index of interface `ifname`; OSError(ENODEV) if there is none."""
        answers = self.request(RTM_GETLINK, 0, _IFINFO.pack(0, 0, 0, 0, 0) + attr(IFLA_IFNAME, _name(ifname)))
        if not answers:  # the kernel answers with the link or an error; never seen
            raise OSError(errno.ENODEV, f"no answer for interface {ifname}")
        return int(_IFINFO.unpack_from(answers[0])[2])

    def add_veth(self, ifname: str, peer: str, peer_netns_fd: int) -> None:
        """A veth pair: `ifname` here, `peer` in the namespace `peer_netns_fd` refers to; both down."""
        peer_info = (_IFINFO.pack(0, 0, 0, 0, 0) + attr(IFLA_IFNAME, _name(peer))
                     + attr(IFLA_NET_NS_FD, struct.pack("=I", peer_netns_fd)))
        link_info = attr(IFLA_INFO_KIND, b"veth") + attr(IFLA_INFO_DATA, attr(VETH_INFO_PEER, peer_info))
        self.request(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL,
                     _IFINFO.pack(0, 0, 0, 0, 0) + attr(IFLA_IFNAME, _name(ifname)) + attr(IFLA_LINKINFO, link_info))

    def set_up(self, index: int) -> None:
        self.request(RTM_NEWLINK, 0, _IFINFO.pack(0, 0, index, IFF_UP, IFF_UP))

    def add_address(self, index: int, address: str, prefixlen: int) -> None:
        """An IPv4 address, scope global (`ip addr add ADDRESS/PREFIXLEN dev INDEX`)."""
        packed = _ipv4(address)
        self.request(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL,
                     _IFADDR.pack(socket.AF_INET, prefixlen, 0, RT_SCOPE_UNIVERSE, index)
                     + attr(IFA_LOCAL, packed) + attr(IFA_ADDRESS, packed))

    def add_route(self, destination: str, *, oif: int, scope: int = RT_SCOPE_UNIVERSE, gateway: str | None = None
                  ) -> None:
        """An IPv4 route in the main table, proto static (`ip route add DESTINATION [via GATEWAY] dev OIF`)."""
        network = ipaddress.IPv4Network(destination)
        body = _RTMSG.pack(socket.AF_INET, network.prefixlen, 0, 0, RT_TABLE_MAIN, RTPROT_STATIC, scope,
                           RTN_UNICAST, 0)
        if network.prefixlen:
            body += attr(RTA_DST, network.network_address.packed)
        if gateway is not None:
            body += attr(RTA_GATEWAY, _ipv4(gateway))
        self.request(RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, body + attr(RTA_OIF, struct.pack("=I", oif)))
