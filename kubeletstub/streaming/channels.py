"""kube's channel protocols over WebSocket (k8s.io/apimachinery/pkg/util/httpstream/wsstream,
pkg/util/remotecommand): every message starts with the number of the channel it belongs to.

remotecommand's channels (exec, attach): 0 stdin, 1 stdout, 2 stderr, 3 error (the final metav1.Status
as JSON), 4 resize (`{"Width":W,"Height":H}`). Subprotocols, in kube's names:

* ``v5.channel.k8s.io``: v4 plus the close signal: a message ``[255, channel]`` half-closes that channel
  (stdin's end of file); kubectl 1.30+ asks for this one only.
* ``v4.channel.k8s.io``: binary messages, the channel number as the first byte (the Python client).
* ``channel.k8s.io`` (v1, error channel as plain text) and the ``base64.`` variants: text messages whose
  first character is the channel as an ASCII digit and the rest base64 (browsers without binary).

Port-forward's (wsstream portforward, `v4.channel.k8s.io` and the older names): for the i-th port of
``?ports=``, channel 2i carries data and 2i+1 errors; the first message the server writes on each is
the port number, 2 bytes little-endian.

Pure: encoding, decoding and negotiation only.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

STDIN, STDOUT, STDERR, ERROR, RESIZE = 0, 1, 2, 3, 4
CLOSE_SIGNAL = 255  # remotecommand.StreamClose (v5)

V5 = "v5.channel.k8s.io"
V4 = "v4.channel.k8s.io"
V4_BASE64 = "v4.base64.channel.k8s.io"
V1 = "channel.k8s.io"
V1_BASE64 = "base64.channel.k8s.io"
EXEC_PROTOCOLS = (V5, V4, V4_BASE64, V1, V1_BASE64)
PORTFORWARD_PROTOCOLS = (V4, V4_BASE64, V1, V1_BASE64)


class ProtocolError(Exception):
    """A message that does not follow the channel protocol."""


@dataclass(frozen=True, slots=True)
class Codec:
    protocol: str

    @property
    def base64(self) -> bool:
        return "base64" in self.protocol

    @property
    def has_close_signal(self) -> bool:
        return self.protocol == V5

    @property
    def structured_status(self) -> bool:
        """v4 and later send the end of a command as a JSON metav1.Status; v1 as plain text."""
        return self.protocol.startswith(("v4.", "v5."))

    def encode(self, channel: int, data: bytes) -> tuple[bool, bytes]:
        """(is_text, payload) of one message on `channel`."""
        if self.base64:
            return True, str(channel).encode("ascii") + base64.b64encode(data)
        return False, bytes([channel]) + data

    def decode(self, payload: bytes) -> tuple[int, bytes]:
        if not payload:
            raise ProtocolError("empty message")
        if self.base64:
            channel = payload[0] - ord("0")
            if not 0 <= channel <= 9:
                raise ProtocolError("bad channel")
            try:
                return channel, base64.b64decode(payload[1:], validate=True)
            except ValueError as exc:
                raise ProtocolError("bad base64") from exc
        return payload[0], payload[1:]


def negotiate(requested: Sequence[str], supported: Sequence[str]) -> str | None:
    """wsstream's handshake: the first protocol the client offers that the server serves; a client that
    offers none gets channel.k8s.io; None when nothing offered is served (the upgrade is refused)."""
    offered = [p.strip() for value in requested for p in value.split(",") if p.strip()]
    if not offered:
        return V1 if V1 in supported else None
    for protocol in offered:
        if protocol in supported:
            return protocol
    return None


def success_status() -> bytes:
    return json.dumps({"metadata": {}, "status": "Success"}).encode()


def exit_status(code: int, command: Sequence[str]) -> bytes:
    """What kubelet writes for a command that exited non-zero: kubectl turns the ExitCode cause into
    `command terminated with exit code N` and its own exit code."""
    status: dict[str, Any] = {
        "metadata": {}, "status": "Failure",
        "message": f"command terminated with non-zero exit code: error executing command {list(command)}, "
                   f"exit code {code}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }
    return json.dumps(status).encode()


def internal_error_status(message: str) -> bytes:
    """apierrors.NewInternalError, as kubelet writes an error that is not an exit code."""
    status = {"metadata": {}, "status": "Failure", "message": f"Internal error occurred: {message}",
              "reason": "InternalError", "details": {"causes": [{"message": message}]}, "code": 500}
    return json.dumps(status).encode()


def parse_resize(data: bytes) -> tuple[int, int] | None:
    """(columns, rows) from a resize message `{"Width":80,"Height":24}`; None when malformed."""
    try:
        size = json.loads(data)
        width, height = int(size["Width"]), int(size["Height"])
    except (ValueError, KeyError, TypeError):
        return None
    if not (0 <= width < 1 << 16 and 0 <= height < 1 << 16):
        return None
    return width, height


def port_prefix(port: int) -> bytes:
    return port.to_bytes(2, "little")
