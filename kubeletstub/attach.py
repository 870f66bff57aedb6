"""`kubectl attach` (and `kubectl run -it`) as kubelet serves it: the client's streams joined to a running
container's own stdio — its output as it is written from now on, its stdin when the container has one
(`stdin: true`), resizes of its terminal (`tty: true`) — over the same channels as exec (Channels of
execsession.py). Detaching (the client going away) leaves the container running; the container's end
ends the session with a Success status, as the CRI's attach reports (kubectl reads the exit code from
the pod's status afterwards).

The container's stdio is the runtime's: it must offer an `AttachableContainer` for a running container
(`attach_target`, replaceable as containerexec.exec_target is). The runtime of this branch has none, so
the kubelet answers an attach with kube's error for a container it cannot attach to.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Protocol

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
    """The running container's stdio; None when there is none to attach to. REPLACE ME with the
    runtime's (e.g. `runtime.attachable(pod.key, container)`)."""
    del dataplane, pod, container
    return None


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
