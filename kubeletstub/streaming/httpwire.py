"""HTTP/1.1 request heads and plain responses, just enough for the kubelet API: every response closes
its connection (Connection: close), so no body framing is needed on the way out, and requests carry no
body the kubelet reads (exec's POST has none; its streams follow the upgrade).
"""

from __future__ import annotations

import asyncio
import urllib.parse
from dataclasses import dataclass, field

MAX_HEAD = 64 * 1024
REASONS = {101: "Switching Protocols", 200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
           404: "Not Found", 405: "Method Not Allowed", 500: "Internal Server Error", 501: "Not Implemented"}


class BadRequest(Exception):
    """A request head that is not HTTP/1.1, or too large."""


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names; repeated ones joined by ", "

    def first(self, name: str, default: str = "") -> str:
        values = self.query.get(name)
        return values[0] if values else default

    def flag(self, name: str) -> bool:
        """kube's query booleans: "1" and "true" (any case) are true, as strconv.ParseBool reads them."""
        return self.first(name).lower() in ("1", "t", "true")

    @property
    def upgrade(self) -> str:
        """The protocol asked for with Connection: Upgrade (lower case), "" for a plain request."""
        connection = {t.strip().lower() for t in self.headers.get("connection", "").split(",")}
        return self.headers.get("upgrade", "").strip().lower() if "upgrade" in connection else ""


def parse_head(head: bytes) -> Request:
    try:
        text = head.decode("latin-1")
        lines = text.split("\r\n")
        method, target, version = lines[0].split(" ")
    except ValueError as exc:
        raise BadRequest("malformed request line") from exc
    if not version.startswith("HTTP/1."):
        raise BadRequest(f"unsupported version {version}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise BadRequest("malformed header")
        key = name.strip().lower()
        headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
    parsed = urllib.parse.urlsplit(target)
    return Request(method.upper(), urllib.parse.unquote(parsed.path),
                   urllib.parse.parse_qs(parsed.query, keep_blank_values=True), headers)


async def read_request(reader: asyncio.StreamReader) -> Request:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.LimitOverrunError as exc:
        raise BadRequest("request head too large") from exc
    return parse_head(head[:-4])


def response_head(status: int, headers: dict[str, str] | None = None) -> bytes:
    lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def respond(writer: asyncio.StreamWriter, status: int, body: bytes | str, *,
                  content_type: str = "text/plain; charset=utf-8") -> None:
    data = body.encode() if isinstance(body, str) else body
    writer.write(response_head(status, {"Content-Type": content_type, "Content-Length": str(len(data)),
                                        "Connection": "close"}) + data)
    try:
        await writer.drain()
    except ConnectionError:
        pass
