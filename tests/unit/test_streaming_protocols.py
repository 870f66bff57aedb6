"""The kubelet API's framing, pure: WebSocket frames, kube's channel protocols, SPDY/3.1 frames and header
blocks, port lists, resize messages and log options — what a hostile or broken client can send."""

from __future__ import annotations

import asyncio
import datetime
import struct
import zlib
from pathlib import Path

import pytest

from kubeletstub import crilog, logs, portforward
from kubeletstub.streaming import channels, spdy, websocket


def read(data: bytes, *, limit: int = websocket.MAX_MESSAGE) -> websocket.Frame:
    async def go() -> websocket.Frame:
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        return await websocket.read_frame(reader, limit=limit)
    return asyncio.run(go())


def test_accept_key_is_rfc_6455s_example() -> None:
    assert websocket.accept_key("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="


@pytest.mark.parametrize("size", [0, 1, 125, 126, 65535, 65536, 200_000])
@pytest.mark.parametrize("masked", [False, True])
def test_frames_round_trip(size: int, masked: bool) -> None:
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    frame = read(websocket.encode_frame(websocket.BINARY, payload, masked=masked))
    assert (frame.fin, frame.opcode, frame.payload) == (True, websocket.BINARY, payload)


@pytest.mark.parametrize(("data", "error"), [
    pytest.param(b"\x82\x7f" + struct.pack("!Q", 1 << 40), websocket.WebSocketError, id="a terabyte announced"),
    pytest.param(b"\xc2\x00", websocket.WebSocketError, id="reserved bit without extension"),
    pytest.param(b"\x82\x05ab", websocket.ConnectionClosed, id="cut short"),
    pytest.param(b"\x82", websocket.ConnectionClosed, id="half a header"),
])
def test_bad_frames_are_refused(data: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        read(data, limit=1 << 20)


@pytest.mark.parametrize(("offered", "supported", "want"), [
    pytest.param(["v5.channel.k8s.io"], channels.EXEC_PROTOCOLS, channels.V5, id="kubectl 1.30+"),
    pytest.param(["v5.channel.k8s.io,v4.channel.k8s.io"], channels.EXEC_PROTOCOLS, channels.V5, id="python client"),
    pytest.param(["v4.channel.k8s.io"], channels.PORTFORWARD_PROTOCOLS, channels.V4, id="port-forward v4"),
    pytest.param(["v5.channel.k8s.io, v4.channel.k8s.io"], channels.PORTFORWARD_PROTOCOLS, channels.V4,
                 id="v5 not served for port-forward"),
    pytest.param([], channels.EXEC_PROTOCOLS, channels.V1, id="none offered: channel.k8s.io"),
    pytest.param(["chat"], channels.EXEC_PROTOCOLS, None, id="nothing in common"),
])
def test_subprotocol_negotiation(offered: list[str], supported: tuple[str, ...], want: str | None) -> None:
    assert channels.negotiate(offered, supported) == want


@pytest.mark.parametrize("protocol", [channels.V5, channels.V4, channels.V4_BASE64, channels.V1_BASE64])
def test_channel_messages_round_trip(protocol: str) -> None:
    codec = channels.Codec(protocol)
    is_text, payload = codec.encode(channels.STDERR, b"\x00\xffdata")
    assert is_text == ("base64" in protocol)
    assert codec.decode(payload) == (channels.STDERR, b"\x00\xffdata")


@pytest.mark.parametrize("payload", [b"", b"9!!!!", b"x"])
def test_bad_base64_channel_messages_are_refused(payload: bytes) -> None:
    with pytest.raises(channels.ProtocolError):
        channels.Codec(channels.V4_BASE64).decode(payload)


@pytest.mark.parametrize(("data", "want"), [
    pytest.param(b'{"Width":80,"Height":24}', (80, 24), id="kubectl's"),
    pytest.param(b'{"Width":-1,"Height":24}', None, id="negative"),
    pytest.param(b'{"Width":99999999,"Height":24}', None, id="beyond a short"),
    pytest.param(b'{"Width":"80"', None, id="not JSON"),
    pytest.param(b"[]", None, id="not an object"),
])
def test_resize_messages(data: bytes, want: tuple[int, int] | None) -> None:
    assert channels.parse_resize(data) == want


def test_exit_status_is_what_kubectl_decodes() -> None:
    import json
    status = json.loads(channels.exit_status(3, ["sh", "-c", "exit 3"]))
    assert (status["status"], status["reason"], status["details"]["causes"]) == (
        "Failure", "NonZeroExitCode", [{"reason": "ExitCode", "message": "3"}])


@pytest.mark.parametrize(("values", "want"), [
    pytest.param(["8080"], [8080], id="one"),
    pytest.param(["80,443", "8080"], [80, 443, 8080], id="comma-joined and repeated"),
])
def test_port_lists(values: list[str], want: list[int]) -> None:
    assert portforward.parse_ports(values) == want


@pytest.mark.parametrize(("values", "message"), [
    pytest.param([], 'query parameter "port" is required', id="none"),
    pytest.param([""], 'query parameter "port" cannot be empty', id="empty"),
    pytest.param(["0"], 'port "0" must be > 0', id="zero"),
    pytest.param(["65536"], 'unable to parse "65536" as a port', id="too big"),
    pytest.param(["８０"], 'unable to parse "８０" as a port', id="fullwidth digits"),
    pytest.param(["80,x"], 'unable to parse "80,x" as a port', id="junk"),
])
def test_bad_port_lists(values: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        portforward.parse_ports(values)


def test_spdy_dictionary_is_the_specs() -> None:
    assert len(spdy.DICTIONARY) == 1423
    assert spdy.DICTIONARY[:11] == b"\x00\x00\x00\x07options" and spdy.DICTIONARY.endswith(b"enq=0.")


def test_spdy_header_blocks_round_trip_through_zlib_with_the_dictionary() -> None:
    deflate = zlib.compressobj(zdict=spdy.DICTIONARY)
    block = deflate.compress(spdy.encode_headers({"streamtype": "stdout", "port": "8080"}))
    block += deflate.flush(zlib.Z_SYNC_FLUSH)
    inflate = zlib.decompressobj(zdict=spdy.DICTIONARY)
    assert spdy.decode_headers(inflate.decompress(block)) == {"streamtype": "stdout", "port": "8080"}


@pytest.mark.parametrize("block", [
    pytest.param(b"\x00\x00\x00\x02\x00\x00\x00\x03abc", id="a pair cut short"),
    pytest.param(b"\x00\x00", id="no count"),
])
def test_bad_spdy_header_blocks_are_refused(block: bytes) -> None:
    with pytest.raises(spdy.SpdyError):
        spdy.decode_headers(block)


def test_a_spdy_header_bomb_is_refused() -> None:
    """A header block that inflates past the bound ends the connection instead of filling memory."""
    deflate = zlib.compressobj(zdict=spdy.DICTIONARY)
    bomb = deflate.compress(b"\x00" * (8 * spdy.MAX_HEADER_BLOCK)) + deflate.flush(zlib.Z_SYNC_FLUSH)
    assert len(bomb) < 64 * 1024

    class Sink:
        def write(self, data: bytes) -> None:
            return None

        async def drain(self) -> None:
            return None

        def close(self) -> None:
            return None

    async def go() -> bool:
        reader = asyncio.StreamReader()
        payload = struct.pack("!IIH", 1, 0, 0) + bomb
        reader.feed_data(spdy.control_frame(spdy.SYN_STREAM, 0, payload))
        reader.feed_eof()
        conn = spdy.SpdyConnection(reader, Sink())
        await conn.run()
        return conn.closed and not conn.streams

    assert asyncio.run(go())


@pytest.mark.parametrize(("text", "want"), [
    pytest.param("2026-01-02T03:04:05.123456789Z", datetime.datetime(2026, 1, 2, 3, 4, 5, 123456, datetime.UTC),
                 id="nanoseconds"),
    pytest.param("2026-01-02T03:04:05Z", datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC), id="seconds"),
    pytest.param("2026-01-02T04:04:05+01:00", datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
                 id="offset"),
])
def test_log_times(text: str, want: datetime.datetime) -> None:
    assert logs.parse_time(text) == want


def test_log_options_tail_limit_and_partial_lines(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    start = datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC)
    path.write_bytes(b"".join([
        crilog.format_line("stdout", b"one", when=start),
        b"garbage that is not a CRI line\n",
        crilog.format_line("stderr", b"tw", partial=True, when=start),
        crilog.format_line("stderr", b"o", when=start),
        crilog.format_line("stdout", b"three", when=start),
    ]))

    async def collect(**query: str) -> bytes:
        options = logs.LogOptions.from_query({k: [v] for k, v in query.items()})
        return b"".join([chunk async for chunk in logs.stream([path], options)])

    assert asyncio.run(collect()) == b"one\ntwo\nthree\n"
    assert asyncio.run(collect(tailLines="1")) == b"three\n"
    assert asyncio.run(collect(tailLines="0")) == b""
    assert asyncio.run(collect(limitBytes="6")) == b"one\ntw"
