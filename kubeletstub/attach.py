"""`kubectl attach` (and `kubectl run -it`) as kubelet serves it: the client's streams joined to a running
container's own stdio — its output as it is written from now on, its stdin when the container has one
(`stdin: true`), resizes of its terminal (`tty: true`) — over the same channels as exec (Channels of
execsession.py). Detaching (the client going away) leaves the container running; the container's end
ends the session with a Success status, as the CRI's attach reports (kubectl reads the exit code from
the pod's status afterwards).

The container's stdio is the runtime's (kubeletstub.runtime: its output as the event loop reads it, its
stdin pipe or terminal); `attach_target` adapts it to an `AttachableContainer`. A pod whose container runs
no command of its own (the built-in server) has nothing to attach to: kube's error for that.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from typing import Any, Protocol

from kubelab.models import Pod

from .containerexec import PodNamespaces
from .execsession import Channels, ClientGone, ExecOptions
from .streaming import channels


class AttachableContainer(Protocol):
    """A running container's stdio, as the runtime holds it."""

    @property
    def tty(self) -> bool: ...

    @property
    def has_stdin(self) -> bool: ...

    def subscribe(self) -> asyncio.Queue[tuple[int, bytes] | None]:
        """Output from now on: (STDOUT or STDERR, data), then None when the container has exited."""
        ...

    def unsubscribe(self, queue: asyncio.Queue[tuple[int, bytes] | None]) -> None: ...

    async def write_stdin(self, data: bytes) -> None: ...

    def close_stdin(self) -> None: ...

    def resize(self, columns: int, rows: int) -> None: ...


AttachLookup = Callable[[Pod, str], "AttachableContainer | None"]


def attach_target(dataplane: PodNamespaces, pod: Pod, container: str) -> AttachableContainer | None:
    """The running container's stdio, from the node's runtime; None when there is none to attach to."""
    runtime = getattr(dataplane, "runtime", None)
    if runtime is None:
        return None
    running = runtime.container(pod.key, container)
    if running is None or not running.running:
        return None
    return _RuntimeContainer(runtime, pod.key, container, tty=running.spec.tty, has_stdin=running.spec.stdin)


# Output chunks held for one attached client that reads slower than the container writes; past it,
# chunks are dropped for that client (the log file keeps everything), never buffered without bound.
ATTACH_BUFFER = 1024


class _RuntimeContainer:
    """A running container of kubeletstub.runtime as attach sees it."""

    def __init__(self, runtime: Any, pod_key: str, name: str, *, tty: bool, has_stdin: bool) -> None:
        self.runtime, self.pod_key, self.name = runtime, pod_key, name
        self._tty, self._has_stdin = tty, has_stdin
        self._unsubscribe: dict[int, Callable[[], None]] = {}

    @property
    def tty(self) -> bool:
        return self._tty

    @property
    def has_stdin(self) -> bool:
        return self._has_stdin

    def subscribe(self) -> asyncio.Queue[tuple[int, bytes] | None]:
        queue: asyncio.Queue[tuple[int, bytes] | None] = asyncio.Queue(ATTACH_BUFFER)

        def listener(stream: str, chunk: bytes) -> None:
            if chunk:
                with contextlib.suppress(asyncio.QueueFull):
                    queue.put_nowait((channels.STDOUT if stream == "stdout" else channels.STDERR, chunk))
            elif not self.runtime.output_open(self.pod_key, self.name):
                _put_end(queue)

        try:
            self._unsubscribe[id(queue)] = self.runtime.subscribe(self.pod_key, self.name, listener)
        except LookupError:  # exited between the lookup and now
            _put_end(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[tuple[int, bytes] | None]) -> None:
        stop = self._unsubscribe.pop(id(queue), None)
        if stop is not None:
            stop()

    async def write_stdin(self, data: bytes) -> None:
        fd = self.runtime.stdin_fd(self.pod_key, self.name)
        if fd is None:
            return
        view = memoryview(data)
        with contextlib.suppress(OSError):  # the container closed its end: input goes nowhere, as in kube
            while view:
                written = await asyncio.to_thread(os.write, fd, view)
                view = view[written:]

    def close_stdin(self) -> None:
        self.runtime.close_stdin(self.pod_key, self.name)

    def resize(self, columns: int, rows: int) -> None:
        self.runtime.resize(self.pod_key, self.name, width=columns, height=rows)


def _put_end(queue: asyncio.Queue[tuple[int, bytes] | None]) -> None:
    """The end marker, even into a full queue (a chunk makes room for it)."""
    while True:
        try:
            queue.put_nowait(None)
            return
        except asyncio.QueueFull:
            queue.get_nowait()


class AttachSession:
    def __init__(self, streams: Channels, target: AttachableContainer, opts: ExecOptions) -> None:
        self.streams = streams
        self.target = target
        self.opts = opts

    async def _output(self, queue: asyncio.Queue[tuple[int, bytes] | None]) -> None:
        while (item := await queue.get()) is not None:
            channel, data = item
            if channel == channels.STDERR and not self.opts.stderr:
                continue
            if channel == channels.STDOUT and not self.opts.stdout:
                continue
            await self.streams.send(channel, data)

    async def _input(self) -> None:
        while True:
            channel, data = await self.streams.receive()
            if channel == channels.STDIN and self.opts.stdin and self.target.has_stdin and data:
                await self.target.write_stdin(data)
            elif channel == channels.CLOSE_SIGNAL and data[:1] == bytes([channels.STDIN]) and self.opts.stdin:
                self.target.close_stdin()
            elif channel == channels.RESIZE and self.target.tty:
                size = channels.parse_resize(data)
                if size is not None:
                    self.target.resize(*size)

    async def run(self) -> None:
        queue = self.target.subscribe()
        output = asyncio.create_task(self._output(queue), name="attach-output")
        receiver = asyncio.create_task(self._input(), name="attach-input")
        try:
            done, _ = await asyncio.wait({output, receiver}, return_when=asyncio.FIRST_COMPLETED)
            if output in done and output.exception() is None and self.streams.structured_status:
                with contextlib.suppress(ClientGone, ConnectionError):
                    await self.streams.send(channels.ERROR, channels.success_status())
        finally:
            self.target.unsubscribe(queue)
            for task in (output, receiver):
                task.cancel()
            await asyncio.gather(output, receiver, return_exceptions=True)
            await self.streams.close()
