"""Stopping a child process the way `docker stop` does: a signal, a grace period, then SIGKILL."""

from __future__ import annotations

import signal
import subprocess
from typing import Any


def stop_process(proc: subprocess.Popen[Any] | None, *, sig: int = signal.SIGTERM, timeout: float = 15.0
                 ) -> int | None:
    """Send `sig` to a running `proc` (by its PID), wait up to `timeout` seconds for it to exit, then
    SIGKILL it. Returns its exit code (-9 when it had to be killed; None for no process)."""
    if proc is None:
        return None
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode
