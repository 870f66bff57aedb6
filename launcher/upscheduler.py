"""`kubelab up`'s scheduler in a process of its own (the default; `kubelab up --one-process` keeps it in up's
process): `python -m launcher.upscheduler --socket PATH --metrics-fd FD --token-fd FD --ready-fd FD`.

Not a command for users: `kubelab up` starts it (SchedulerProcess below, which starts it again when it
exits, with the kubelet's back-off) and hands it:
- --socket: the API server's private unix socket, which up's other components use too;
- --metrics-fd: its /metrics listener on loopback, bound by up (whose address cluster.json records);
- --token-fd: a pipe holding its bearer token (empty without --token-auth-file), so the token is on no
  command line, in no environment and in no file;
- --ready-fd: a pipe it writes "ready" to once its informers have synced.

Why a process: the scheduler's bindings wait for answers, and in up's process every answer waited for a
turn of the event loop that also runs every node's kubelet and proxy agent. At 50 nodes x 20 pods a pod
waited up to 34 s between its create and its binding there, 1.2 s in a process of its own
(BENCHMARKS.md, "The scheduler in a process of its own"). kube-scheduler is a process of its own too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import socket
import subprocess
import sys
from collections.abc import Callable

from kubelab.processes import spawn, stop_process

from .supervision import RestartBackoff, exit_code, how_it_ended, keep_running, readable

MODULE = "launcher.upscheduler"
READY = b"ready\n"
STOP_TIMEOUT = 10.0

log = logging.getLogger("kubelab.component.scheduler")


def argv(socket_path: str, *, metrics_fd: int, token_fd: int, ready_fd: int) -> list[str]:
    """The child's command line. Pure."""
    return [sys.executable, "-m", MODULE, "--socket", socket_path, "--metrics-fd", str(metrics_fd),
            "--token-fd", str(token_fd), "--ready-fd", str(ready_fd)]


async def serve(socket_path: str, token: str | None, metrics_sock: socket.socket, ready_fd: int) -> None:
    from kubelab.client import ApiClient
    from kubelab.metricsserver import MetricsServer

    from .build import SchedulerOptions, build_scheduler
    from .runner import PRIVATE_SERVER

    api = ApiClient(PRIVATE_SERVER, uds=socket_path, token=token, user_agent="kubelab-scheduler", fast_requests=True)
    scheduler = build_scheduler(api, SchedulerOptions())
    metrics = MetricsServer("127.0.0.1", 0, registry=scheduler.metrics.registry, name="scheduler", sock=metrics_sock)
    await metrics.start()

    async def tell_ready() -> None:
        await scheduler.nodes.wait_synced()
        await scheduler.pods.wait_synced()
        with contextlib.suppress(OSError):  # up is gone: it will not ask
            os.write(ready_fd, READY)
        os.close(ready_fd)

    try:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(scheduler.run(), name="scheduler")
            tg.create_task(metrics.serve_forever(), name="scheduler-metrics")
            tg.create_task(tell_ready(), name="scheduler-ready")
    finally:
        await api.close()


def main(args: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n\n")[0])
    parser.add_argument("--socket", required=True)
    parser.add_argument("--metrics-fd", type=int, required=True)
    parser.add_argument("--token-fd", type=int, required=True)
    parser.add_argument("--ready-fd", type=int, required=True)
    parsed = parser.parse_args(args)
    with os.fdopen(parsed.token_fd, "rb") as pipe:
        token = pipe.read().decode().strip() or None
    metrics_sock = socket.socket(fileno=parsed.metrics_fd)
    from kubelab.gctune import tune_for_long_running
    from kubelab.logs import setup as setup_logging

    from .runner import exit_now, run_until_interrupted

    setup_logging()
    tune_for_long_running()
    # Only API requests and watches: uvloop, as `kubelab scheduler` runs. Then out without the interpreter's
    # teardown (exit_now), which made `kubelab up`'s Ctrl-C wait ~0.7 s longer for this process.
    exit_now(run_until_interrupted(lambda: serve(parsed.socket, token, metrics_sock, parsed.ready_fd),
                                   fast_loop=True, logger=log))


class SchedulerProcess:
    """The child, seen from `kubelab up`: started by run(), again whenever it exits (supervision.keep_running),
    stopped (SIGTERM, SIGKILL after STOP_TIMEOUT) when run() is cancelled. Its metrics listener is bound here
    once, so its address stays the same across restarts."""

    url = ""  # serves nothing users reach but its metrics
    log_at = "above"  # its output is up's

    def __init__(self, socket_path: str, token: str | None, *, on_change: Callable[[], None] = lambda: None
                 ) -> None:
        self.socket_path, self._token, self._on_change = socket_path, token, on_change
        self.metrics = socket.create_server(("127.0.0.1", 0))
        self.metrics_url = f"http://127.0.0.1:{self.metrics.getsockname()[1]}/metrics"
        self.process: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self.state = "starting"
        self.ready = asyncio.Event()  # set once the first child has synced
        self.backoff = RestartBackoff()
        self._ready_read = -1  # the read end of the last child's ready pipe

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def exited(self) -> None:
        pass  # its metrics listener stays bound for the next child

    def launch(self) -> None:
        """Start a child, with a ready pipe for wait_ready."""
        token_read, token_write = os.pipe()
        ready_read, ready_write = os.pipe()
        try:
            # A token is far smaller than a pipe's buffer: written whole before the child runs.
            os.write(token_write, (self._token or "").encode())
            os.close(token_write)
            token_write = -1
            fds = (self.metrics.fileno(), token_read, ready_write)
            # Its own session: the terminal's Ctrl-C reaches `kubelab up`, which stops it in order.
            self.process = spawn(argv(self.socket_path, metrics_fd=fds[0], token_fd=token_read, ready_fd=ready_write),
                                 start_new_session=True, pass_fds=fds, stdin=subprocess.DEVNULL)
        except BaseException:
            os.close(ready_read)
            raise
        finally:
            for fd in (token_read, token_write, ready_write):
                if fd >= 0:
                    os.close(fd)
        self._ready_read = ready_read

    async def wait_ready(self) -> bool:
        """Whether the child said it is ready (False: it exited, or closed the pipe, first)."""
        ready_read, self._ready_read = self._ready_read, -1
        try:
            await readable(ready_read)
            try:
                said = os.read(ready_read, len(READY))
            except OSError:
                said = b""
        finally:
            os.close(ready_read)
        if said != READY:
            return False
        self.ready.set()
        return True

    async def run(self) -> None:
        """Until cancelled. RuntimeError if the first child exits before it is ready (a start that cannot
        work is not retried, as for the API server's process); any later exit starts it again."""
        try:
            self.launch()
            assert self.process is not None
            self._on_change()
            if not await self.wait_ready():
                raise RuntimeError(f"the scheduler's process (pid {self.process.pid}) "
                                   f"{how_it_ended(await exit_code(self.process))} before it was ready; see its errors "
                                   "above")
            self.state = "running"
            self._on_change()
            await keep_running(self, log, self._on_change)
        finally:
            if self._ready_read >= 0:
                os.close(self._ready_read)
            await asyncio.to_thread(stop_process, self.process, timeout=STOP_TIMEOUT)
            self.metrics.close()

    def record(self) -> dict[str, object]:
        """What cluster.json (and so `kubelab status`) says of it."""
        return {"pid": self.pid, "state": self.state, "restarts": self.restarts, "metrics": self.metrics_url}


if __name__ == "__main__":
    sys.exit(main())
