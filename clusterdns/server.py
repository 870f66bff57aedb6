"""The DNS server's sockets: UDP and TCP on one address, optionally inside a network namespace, and a
small HTTP endpoint for Prometheus metrics (CoreDNS's :9153).

A socket belongs to the network namespace it was created in, whatever thread uses it later. So the
sockets are created by a throwaway thread that has entered the namespace (setns changes only the
calling thread), and served by the event loop in the caller's namespace, where the API client
keeps talking to the API server over loopback.

Messages are parsed and built by dnspython; this module only frames them (UDP datagrams, TCP's
two-byte length prefix, RFC 1035 4.2.2) and truncates what does not fit a UDP reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass

import dns.exception
import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype
from prometheus_client import CollectorRegistry, Counter, generate_latest

log = logging.getLogger(__name__)

Responder = Callable[[dns.message.Message], dns.message.Message]
UDP_DEFAULT_SIZE = 512
TCP_IDLE_TIMEOUT = 10.0


@dataclass
class Sockets:
    udp: socket.socket
    tcp: socket.socket
    metrics: socket.socket | None = None

    def close(self) -> None:
        for sock in (self.udp, self.tcp, self.metrics):
            if sock is not None:
                sock.close()

    @property
    def port(self) -> int:
        return int(self.udp.getsockname()[1])


# With port 0 the kernel picks a free UDP port, and TCP must take the same number, which another TCP socket
# may hold: then try another UDP port.
ANY_PORT_ATTEMPTS = 100


def _bind(host: str, port: int, metrics_port: int | None) -> Sockets:
    for attempt in range(ANY_PORT_ATTEMPTS if port == 0 else 1):
        try:
            return _bind_once(host, port, metrics_port)
        except OSError as exc:
            if port != 0 or exc.errno != errno.EADDRINUSE or attempt == ANY_PORT_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def _bind_once(host: str, port: int, metrics_port: int | None) -> Sockets:
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    metrics = socket.socket(socket.AF_INET, socket.SOCK_STREAM) if metrics_port is not None else None
    try:
        udp.bind((host, port))
        port = udp.getsockname()[1]  # port 0: TCP takes the same port UDP got
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        tcp.bind((host, port))
        tcp.listen(128)
        if metrics is not None and metrics_port is not None:
            metrics.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            metrics.bind((host, metrics_port))
            metrics.listen(16)
        for sock in (udp, tcp, metrics):
            if sock is not None:
                sock.setblocking(False)
    except BaseException:
        for sock in (udp, tcp, metrics):
            if sock is not None:
                sock.close()
        raise
    return Sockets(udp, tcp, metrics)


def open_sockets(host: str, port: int, *, netns: str | None = None, metrics_port: int | None = None
                 ) -> Sockets:
    """Bind the server's sockets, inside `netns` (a named network namespace) if given. Blocking."""
    if netns is None:
        return _bind(host, port, metrics_port)
    from kubelab.netnsthread import run_in_netns

    try:
        return run_in_netns(netns, lambda: _bind(host, port, metrics_port), name=f"dns-sockets-{netns}")
    except Exception as exc:
        raise OSError(f"cannot listen on {host}:{port} in network namespace {netns}: {exc}") from exc


class Metrics:
    """A few of CoreDNS's counters (coredns_dns_requests_total, coredns_dns_responses_total)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("coredns_dns_requests", "Counter of DNS requests made per zone, protocol and "
                                "family.", ["server", "zone", "proto", "family", "type"],
                                registry=self.registry)
        self.responses = Counter("coredns_dns_responses", "Counter of response status codes.",
                                 ["server", "zone", "rcode"], registry=self.registry)

    def observe(self, query: dns.message.Message | None, response: dns.message.Message, proto: str,
                zone: str) -> None:
        qtype = (dns.rdatatype.to_text(query.question[0].rdtype) if query is not None and query.question
                 else "other")
        self.requests.labels("dns://:53", zone, proto, "1", qtype).inc()
        self.responses.labels("dns://:53", zone, dns.rcode.to_text(response.rcode())).inc()


class DnsServer:
    """Answers on UDP and TCP with `respond` (a pure function of the query)."""

    def __init__(self, respond: Responder, *, zone: str = "cluster.local.") -> None:
        self.respond = respond
        self.zone = zone
        self.metrics = Metrics()

    def handle(self, wire: bytes, *, tcp: bool) -> bytes | None:
        """One message in, one out (None: unparseable beyond its header, so no one to answer)."""
        try:
            query = dns.message.from_wire(wire)
        except dns.exception.DNSException:
            if len(wire) < 12:
                return None
            reply = dns.message.Message(id=struct.unpack("!H", wire[:2])[0])
            reply.flags = dns.flags.QR
            reply.set_rcode(dns.rcode.FORMERR)
            return reply.to_wire()
        response = self.respond(query)
        self.metrics.observe(query, response, "tcp" if tcp else "udp", self.zone)
        advertised = query.payload if query.edns >= 0 else UDP_DEFAULT_SIZE
        limit = 65535 if tcp else max(UDP_DEFAULT_SIZE, advertised)
        try:
            return response.to_wire(max_size=limit)
        except dns.exception.TooBig:
            # Too big for UDP: an empty answer with TC set, so the client asks again over TCP.
            truncated = dns.message.make_response(query)
            truncated.flags |= dns.flags.TC | (response.flags & dns.flags.AA)
            truncated.set_rcode(response.rcode())
            return truncated.to_wire()

    async def serve(self, sockets: Sockets) -> None:
        """Serve until cancelled."""
        loop = asyncio.get_running_loop()
        server = self

        class Datagrams(asyncio.DatagramProtocol):
            transport: asyncio.DatagramTransport

            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                self.transport = transport  # type: ignore[assignment]

            def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
                try:
                    reply = server.handle(data, tcp=False)
                except Exception:  # one bad query must not stop the server
                    log.exception("failed to answer a query from %s", addr)
                    return
                if reply is not None:
                    self.transport.sendto(reply, addr)

        transport, _ = await loop.create_datagram_endpoint(Datagrams, sock=sockets.udp)
        tcp_server = await asyncio.start_server(self._serve_stream, sock=sockets.tcp)
        metrics_server = (await asyncio.start_server(self._serve_metrics, sock=sockets.metrics)
                          if sockets.metrics is not None else None)
        try:
            await asyncio.Event().wait()
        finally:
            transport.close()
            tcp_server.close()
            if metrics_server is not None:
                metrics_server.close()

    async def _serve_stream(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                header = await asyncio.wait_for(reader.readexactly(2), TCP_IDLE_TIMEOUT)
                length = struct.unpack("!H", header)[0]
                wire = await asyncio.wait_for(reader.readexactly(length), TCP_IDLE_TIMEOUT)
                reply = self.handle(wire, tcp=True)
                if reply is None:
                    return
                writer.write(struct.pack("!H", len(reply)) + reply)
                await writer.drain()
        except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
            return
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _serve_metrics(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), TCP_IDLE_TIMEOUT)
            path = request.split(b" ", 2)[1] if request.count(b" ") >= 2 else b"/"
            if path.split(b"?")[0] == b"/metrics":
                body, status = generate_latest(self.metrics.registry), b"200 OK"
            else:
                body, status = b"404 page not found\n", b"404 Not Found"
            head = (b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain; version=0.0.4\r\n"
                    b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n")
            writer.write(head + body)
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()
