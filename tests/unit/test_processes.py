"""stop_process: a signal and a grace period, then SIGKILL, as `docker stop`; spawn: a child that dies
with this process (kubelab/processes.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import polling

from kubelab.processes import _prctl, die_with_parent, spawn, stop_process

IGNORES_TERM = "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
# SIGINT is blocked before 'ready' and taken with sigwait: a SIGINT sent the moment 'ready' is read is
# never missed. Under load the former child (print 'ready', then `try: time.sleep(60) except
# KeyboardInterrupt`) failed 121 runs in 400: a SIGINT between the print and the try ended it with a
# traceback (exit 1). With the print inside the try, 1 in 300 still failed: a SIGINT after Python's
# last signal check but before sleep's system call waits out the sleep (killed after the grace, -9).
EXITS_ON_INT = ("import signal, sys\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})\nprint('ready', flush=True)\n"
                "signal.sigwait({signal.SIGINT})\nsys.exit(0)")


def start(code: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    return proc


def test_a_process_that_exits_on_the_signal_gives_its_exit_code() -> None:
    assert stop_process(start(EXITS_ON_INT), sig=signal.SIGINT, timeout=30) == 0


def test_a_process_that_ignores_the_signal_is_killed_after_the_grace_period() -> None:
    proc = start(IGNORES_TERM)
    assert stop_process(proc, timeout=0.5) == -signal.SIGKILL
    assert proc.poll() == -signal.SIGKILL


def test_nothing_to_stop() -> None:
    assert stop_process(None) is None
    done = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    done.wait()
    assert stop_process(done) == 3  # already exited: its code, no signal


# A parent that spawns `sleep` from a thread that then ends (as asyncio.to_thread's workers may), prints
# the child's PID and waits to be killed.
PARENT = textwrap.dedent("""
    import sys, threading, time
    from kubelab.processes import spawn
    children = []
    starter = threading.Thread(target=lambda: children.append(spawn(["sleep", "600"])))
    starter.start()
    starter.join()
    print(children[0].pid, flush=True)
    time.sleep(600)
""")


def running(pid: int) -> bool:
    """Whether `pid` runs (a zombie has exited; so has a PID that is gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def test_a_spawned_child_dies_with_its_parent_even_when_the_thread_that_started_it_has_ended() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, cwd=Path(__file__).parents[2])
    child = 0
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert running(child)  # the starting thread has ended, and the child lives on
        parent.kill()  # SIGKILL: the parent gets no chance to stop anything
        parent.wait()
        polling.wait_for("the child to die with its parent", lambda: not running(child), 30, retry_on=())
    finally:
        stop_process(parent)
        if child and running(child):
            os.kill(child, signal.SIGKILL)


def test_a_child_whose_parent_is_already_gone_when_it_starts_goes_at_once() -> None:
    # As if the parent had died between fork and prctl: the parent it checks for is not its parent.
    prctl = _prctl()
    assert prctl is not None
    preexec = lambda: die_with_parent(os.getppid() + 1, prctl)
    child = subprocess.Popen(["sleep", "600"], preexec_fn=preexec)  # noqa: PLW1509 - as spawn does
    assert child.wait(timeout=30) == -signal.SIGKILL


def test_spawn_passes_popen_arguments_through() -> None:
    child = spawn([sys.executable, "-c", "import sys; print(sys.stdin.read().upper())"], stdin=subprocess.PIPE,
                  stdout=subprocess.PIPE)
    out, _ = child.communicate(b"hello", timeout=30)
    assert (out, child.returncode) == (b"HELLO\n", 0)
