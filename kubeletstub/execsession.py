"""One `kubectl exec` as the kubelet runs it: a process started with the streams asked for, its output
sent on the channels, stdin and resizes received, and its end reported as a metav1.Status.

The process gets a session of its own (a process group to kill) and, with a tty, a pseudo-terminal as
its controlling terminal (`setsid --ctty`: no Python runs between fork and exec, which a process
holding gRPC's threads must not do). When the client goes away before the command ends, the whole
process group is killed and every descriptor closed: an abandoned stream leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import shutil
import signal
import struct
import termios
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from .streaming import channels
from .streaming.websocket import BINARY, TEXT, ConnectionClosed, WebSocket, WebSocketError

READ_SIZE = 32 * 1024
SETSID = shutil.which("setsid") or "/usr/bin/setsid"  # found here: a container's env may have no PATH
DRAIN_AFTER_EXIT = 5.0  # output still in the pipes after the command ended, e.g. a background child's


@dataclass(frozen=True, slots=True)
class ExecOptions:
    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool


def options_problem(opts: ExecOptions) -> str | None:
    """kubelet's NewOptions: at least one stream (with a tty, stderr is folded into stdout)."""
    if not (opts.stdin or opts.stdout or opts.stderr):
        return "you must specify at least 1 of stdin, stdout, stderr"
    return None


def _wake(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


async def _read_fd(fd: int) -> bytes:
    """Up to READ_SIZE bytes from a non-blocking descriptor; b"" at its end (EIO: a pty whose other side
    closed)."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            return os.read(fd, READ_SIZE)
        except BlockingIOError:
            ready: asyncio.Future[None] = loop.create_future()
            loop.add_reader(fd, _wake, ready)
            try:
                await ready
            finally:
                loop.remove_reader(fd)
        except OSError as exc:
            if exc.errno == errno.EIO:
                return b""
            raise


async def _write_fd(fd: int, data: bytes) -> None:
    loop = asyncio.get_running_loop()
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
            view = view[written:]
        except BlockingIOError:
            ready: asyncio.Future[None] = loop.create_future()
            loop.add_writer(fd, _wake, ready)
            try:
                await ready
            finally:
                loop.remove_writer(fd)


def _set_size(fd: int, columns: int, rows: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))


class ClientGone(Exception):
    """The client closed the stream's connection (or broke its protocol)."""


class Channels(Protocol):
    """remotecommand's five channels over some transport (WebSocket, SPDY): what a session sends on
    them, and the client's events: (STDIN, data), (CLOSE_SIGNAL, bytes([STDIN])) at stdin's end, (RESIZE,
    a JSON size). `receive` raises ClientGone once the client is gone."""

    structured_status: bool

    async def send(self, channel: int, data: bytes) -> None: ...

    async def receive(self) -> tuple[int, bytes]: ...

    async def close(self) -> None: ...


class WebSocketChannels:
    def __init__(self, ws: WebSocket, codec: channels.Codec) -> None:
        self.ws = ws
        self.codec = codec
        self.structured_status = codec.structured_status

    async def send(self, channel: int, data: bytes) -> None:
        is_text, payload = self.codec.encode(channel, data)
        try:
            await self.ws.send(payload, opcode=TEXT if is_text else BINARY)
        except ConnectionClosed as exc:
            raise ClientGone(str(exc)) from exc

    async def receive(self) -> tuple[int, bytes]:
        while True:
            try:
                _, payload = await self.ws.receive()
                channel, data = self.codec.decode(payload)
            except channels.ProtocolError:
                continue
            except (ConnectionClosed, WebSocketError, ConnectionError) as exc:
                raise ClientGone(str(exc)) from exc
            if channel == channels.CLOSE_SIGNAL and not self.codec.has_close_signal:
                continue
            return channel, data

    async def close(self) -> None:
        await self.ws.close()


class ExecSession:
    """Runs `argv` behind `streams`. `command` is what the user asked for (for the Status message)."""

    def __init__(self, streams: Channels, argv: Sequence[str], command: Sequence[str], opts: ExecOptions, *,
                 env: dict[str, str] | None = None, cwd: str | None = None) -> None:
        self.streams = streams
        self.argv = list(argv)
        self.command = list(command)
        self.opts = opts
        self.env = env
        self.cwd = cwd
        self._fds: list[int] = []
        self._stdin_fd: int | None = None
        self._pty: int | None = None

    async def send(self, channel: int, data: bytes) -> None:
        await self.streams.send(channel, data)

    def _own(self, fd: int) -> int:
        os.set_blocking(fd, False)
        self._fds.append(fd)
        return fd

    def _close_fd(self, fd: int | None) -> None:
        if fd is not None and fd in self._fds:
            self._fds.remove(fd)
            with contextlib.suppress(OSError):
                os.close(fd)

    async def _spawn(self) -> tuple[asyncio.subprocess.Process, list[tuple[int, int]]]:
        """The process, and (fd, channel) pairs of its output."""
        if self.opts.tty:
            master, slave = os.openpty()
            try:
                proc = await asyncio.create_subprocess_exec(
                    SETSID, "--ctty", "--wait", *self.argv, stdin=slave, stdout=slave, stderr=slave, env=self.env,
                    cwd=self.cwd)
            finally:
                os.close(slave)
            self._pty = self._own(master)
            self._stdin_fd = self._pty if self.opts.stdin else None
            return proc, [(self._pty, channels.STDOUT)] if self.opts.stdout else []
        child_fds: list[int] = []
        stdin_r: int | None = None
        outputs: list[tuple[int, int]] = []
        try:
            if self.opts.stdin:
                stdin_r, stdin_w = os.pipe()
                child_fds.append(stdin_r)
                self._stdin_fd = self._own(stdin_w)
            out_w = err_w = None
            if self.opts.stdout:
                out_r, out_w = os.pipe()
                child_fds.append(out_w)
                outputs.append((self._own(out_r), channels.STDOUT))
            if self.opts.stderr:
                err_r, err_w = os.pipe()
                child_fds.append(err_w)
                outputs.append((self._own(err_r), channels.STDERR))
            proc = await asyncio.create_subprocess_exec(
                *self.argv, stdin=stdin_r if stdin_r is not None else asyncio.subprocess.DEVNULL,
                stdout=out_w if out_w is not None else asyncio.subprocess.DEVNULL,
                stderr=err_w if err_w is not None else asyncio.subprocess.DEVNULL,
                start_new_session=True, env=self.env, cwd=self.cwd)
        finally:
            for fd in child_fds:
                os.close(fd)
        return proc, outputs

    async def _pump_output(self, fd: int, channel: int) -> None:
        while True:
            data = await _read_fd(fd)
            if not data:
                return
            await self.send(channel, data)

    async def _receive(self) -> None:
        """Client messages until the client goes away (which ends the session)."""
        while True:
            channel, data = await self.streams.receive()
            if channel == channels.CLOSE_SIGNAL:
                if data[:1] == bytes([channels.STDIN]) and self._stdin_fd is not None:
                    if self._pty is not None:
                        # A terminal's end of file is ^D, not a closed descriptor (the pty carries output too).
                        await _write_fd(self._pty, b"\x04")
                    else:
                        self._close_fd(self._stdin_fd)
                    self._stdin_fd = None
            elif channel == channels.STDIN and self._stdin_fd is not None and data:
                try:
                    await _write_fd(self._stdin_fd, data)
                except OSError:  # the command closed its stdin: what follows goes nowhere, as with a pipe
                    self._close_fd(self._stdin_fd)
                    self._stdin_fd = None
            elif channel == channels.RESIZE and self._pty is not None:
                size = channels.parse_resize(data)
                if size is not None:
                    with contextlib.suppress(OSError):
                        _set_size(self._pty, *size)

    async def run(self) -> None:
        try:
            proc, outputs = await self._spawn()
        except OSError as exc:
            await self.finish(channels.internal_error_status(f"error executing command in container: {exc}"))
            return
        receiver = asyncio.create_task(self._receive(), name="exec-receive")
        pumps = [asyncio.create_task(self._pump_output(fd, ch), name=f"exec-out-{ch}") for fd, ch in outputs]
        waiter = asyncio.create_task(proc.wait(), name="exec-wait")
        try:
            done, _ = await asyncio.wait({receiver, waiter}, return_when=asyncio.FIRST_COMPLETED)
            if waiter not in done:
                return  # the client went away (or broke the protocol): the finally kills the command
            if pumps:
                await asyncio.wait(pumps, timeout=DRAIN_AFTER_EXIT)
            code = waiter.result()
            await self.finish(channels.success_status() if code == 0 else self._exit_status(code))
        except (ClientGone, ConnectionError):
            pass
        finally:
            for task in (receiver, *pumps):
                task.cancel()
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
            await asyncio.gather(receiver, *pumps, return_exceptions=True)
            with contextlib.suppress(ProcessLookupError):
                await proc.wait()
            for fd in list(self._fds):
                self._close_fd(fd)
            await self.streams.close()

    def _exit_status(self, code: int) -> bytes:
        # A command killed by a signal exits 128+N, as the shell and containerd report it.
        return channels.exit_status(code if code >= 0 else 128 - code, self.command)

    async def finish(self, status: bytes) -> None:
        if not self.streams.structured_status:
            # v1's error channel is plain text, and nothing for success.
            text = b"" if b'"Success"' in status else status
            if text:
                await self.send(channels.ERROR, text)
            return
        await self.send(channels.ERROR, status)


async def refuse_exec(streams: Channels, opts: ExecOptions, command: Sequence[str], *, message: str) -> None:
    """An exec the runtime cannot start (a missing binary), as kubelet on containerd answers it: no output
    and no exit code, an InternalError Status on the error channel (kubelet's `error executing command in
    container: ` around containerd's words), which kubectl prints as `error: Internal error occurred: ...`
    and exits 1. (Docker's shim ran the failure as a process that exited 126/127 instead.)"""
    session = ExecSession(streams, [], command, opts)
    try:
        await session.finish(channels.internal_error_status(f"error executing command in container: {message}"))
    except (ClientGone, ConnectionError):
        pass
    finally:
        await streams.close()
