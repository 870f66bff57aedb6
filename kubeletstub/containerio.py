"""Streams into a running container, the runtime's side of attach and exec (CRI's Attach and Exec): its
output as it is read, its stdin and terminal, and how a command is started inside it (nsenter into its
namespaces and root, with its environment and working directory). `ContainerRuntime` (`runtime.py`)
has these as methods; the kubelet API (`attach.py`, `execsession.py`) and the prober use them."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import struct
import subprocess
import termios
from collections.abc import Callable, Sequence
from typing import Any

from . import crilog
from .runtimetypes import Container

# Found on kubelab's PATH: the command entering a container gets the container's environment, whose PATH
# (the user's to set) may not lead to it.
NSENTER = shutil.which("nsenter") or "/usr/bin/nsenter"


class ContainerStreams:
    """Attach and exec on the running containers in `_containers` (a ContainerRuntime's)."""

    namespaces: bool
    _containers: dict[tuple[str, str], Container]

    # --- attach ------------------------------------------------------------------------------------

    def subscribe(self, pod_key: str, name: str, listener: Callable[[crilog.Stream, bytes], None]
                  ) -> Callable[[], None]:
        """Call `listener(stream, chunk)` with the running container's output as it is read (b"" when a
        stream ends), on the event loop; it must not block. Returns the unsubscribe function. Raises
        LookupError when the container is not running."""
        container = self._containers.get((pod_key, name))
        if container is None or not container.running:
            raise LookupError(f"container {name} of {pod_key} is not running")
        container._listeners.append(listener)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                container._listeners.remove(listener)

        return unsubscribe

    def output_open(self, pod_key: str, name: str) -> bool:
        """Whether any of the running container's output streams is still open (attach ends when none is)."""
        container = self._containers.get((pod_key, name))
        return container is not None and container._open_pipes > 0

    def stdin_fd(self, pod_key: str, name: str) -> int | None:
        """The descriptor to write the container's stdin to (its terminal with tty), None when the
        container has no stdin (spec `stdin: false`) or it was closed. Blocking: write it with
        loop.add_writer or from a thread."""
        container = self._containers.get((pod_key, name))
        if container is None or container._stdin is None or container._stdin.closed:
            return None
        return int(container._stdin.fileno())

    def close_stdin(self, pod_key: str, name: str) -> None:
        """End of input (stdinOnce, or the client closed stdin): the pipe closed, or ^D on a terminal."""
        container = self._containers.get((pod_key, name))
        if container is None or container._stdin is None or container._stdin.closed:
            return
        if container.spec.tty:
            with contextlib.suppress(OSError):
                os.write(container._stdin.fileno(), b"\x04")
        else:
            container._stdin.close()

    def resize(self, pod_key: str, name: str, *, width: int, height: int) -> None:
        """Terminal resize (the resize channel of attach and exec -t)."""
        container = self._containers.get((pod_key, name))
        if container is None or not container.spec.tty or container._stdin is None or container._stdin.closed:
            return
        fcntl.ioctl(container._stdin.fileno(), termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))

    # --- exec --------------------------------------------------------------------------------------

    def exec_command(self, pod_key: str, name: str, cmd: Sequence[str]) -> tuple[list[str], dict[str, str], str]:
        """(argv, env, cwd) that runs `cmd` inside the running container `name` of `pod_key`: the same
        network, UTS and mount namespaces and root (nsenter into its main process), its environment and
        working directory. Raises LookupError when the container is not running. `spawn_in_container`
        starts it."""
        container = self._containers.get((pod_key, name))
        if container is None or not container.running or not container.pid:
            raise LookupError(f"container {name} of {pod_key} is not running")
        env = dict(container.spec.env)
        cwd = container.spec.working_dir or "/"
        if not self.namespaces:
            return list(cmd), env, cwd
        # `-w` alone: the command's own working directory (its workingDir), found inside its mount
        # namespace and root; nsenter 2.38 opens a named one before entering them.
        argv = [NSENTER, "-t", str(container.init_pid or container.pid), "-n", "-u", "-m", "-p", "-r", "-w",
                "--", *cmd]
        return argv, env, "/"



def spawn_in_container(runtime: ContainerStreams, pod_key: str, name: str, cmd: Sequence[str],
                       **popen_kwargs: Any) -> subprocess.Popen[bytes]:
    """Start `cmd` inside a running container (kubectl exec): from the event loop's thread, in a session
    of its own; stdin/stdout/stderr as given in `popen_kwargs`. A missing binary exits 127 with nsenter's
    message on stderr ("failed to execute ...: No such file or directory"), 126 when not executable."""
    argv, env, cwd = runtime.exec_command(pod_key, name, cmd)
    return subprocess.Popen(argv, env=env, cwd=cwd, close_fds=True, start_new_session=True, **popen_kwargs)

