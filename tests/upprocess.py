"""`kubelab up` as a test starts it by hand (not through the e2e harness): a process of its own, its output
to a file, and the wait until it says it is up."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import polling

REPO = Path(__file__).resolve().parents[1]
READY_LINE = "Ctrl-C stops everything"  # the last line `kubelab up` prints once everything is ready
START_BUDGET = 300.0  # a safety net against a hung start on a loaded machine, not a measurement


def start_up(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    """`kubelab up ARGS` from this checkout, its output (stdout and stderr) to `log`."""
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "kubelab", "up", *args], stdout=out,
                                stderr=subprocess.STDOUT, cwd=REPO)


def wait_until_up(up: subprocess.Popen[bytes], log: Path, timeout: float = START_BUDGET) -> None:
    """Until `up` says it is ready; gives up at once, with its output, if it exits first."""
    def ready() -> bool:
        if up.poll() is not None:
            raise polling.GiveUp(f"kubelab up exited with {up.returncode}:\n{log.read_text()}")
        return READY_LINE in log.read_text()

    polling.wait_for("kubelab up", ready, timeout, retry_on=())
