"""An empty network namespace for the e2e tests that program rules into one directly (no lab, no
kubelet): the proxiers' and renderers' tests, and sockets bound inside a namespace."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import pytest


@contextmanager
def scratch_netns(prefix: str, *, tools: tuple[str, ...] = ("ip",)) -> Iterator[str]:
    """A namespace named `<prefix>-<random>`: root only (skips otherwise, as every e2e test), `tools`
    must be on PATH (a failure otherwise: CI has them), and it is deleted afterwards even when the test
    failed; one still listed then fails the test, so a leak is seen rather than piling up."""
    if os.geteuid() != 0:
        pytest.skip("needs root: creates network namespaces (CI runs as root)")
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        pytest.fail(f"missing tools on PATH: {', '.join(missing)} (make system-deps installs them)")
    name = f"{prefix}-{secrets.token_hex(4)}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
        assert name not in listed.split(), f"network namespace {name} left behind"
