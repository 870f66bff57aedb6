"""What the browser tests of `kubelab ui` share: the UI process for a cluster, Debian's headless Chromium
driven by selenium through Debian's chromedriver (nothing downloaded), and readers of what the page draws.
Tests import the fixtures by name (`from uibrowser import browser, ui`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubelab_cluster import Cluster

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
HAVE_CHROMIUM = os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)
NEEDS_CHROMIUM = pytest.mark.skipif(not HAVE_CHROMIUM,
                                    reason="needs Debian's chromium and chromium-driver (make system-deps)")


@pytest.fixture
def ui(cluster: Cluster) -> Iterator[str]:
    """`kubelab ui` for the cluster on a free loopback port; its URL."""
    proc = subprocess.Popen([sys.executable, "-m", "kubelab", "ui", "--data-dir", str(cluster.data_dir),
                             "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("kubelab ui: http://"), first
        yield first.split(": ", 1)[1].strip()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000", f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(tmp_path / "chromium-profile", ignore_errors=True)


# One script, one WebDriver round trip: reading each element's attributes one by one costs a round trip
# each, which on a loaded machine is most of what a measurement of the page would measure.
DRAWN_JS = """
const found = {};
for (const card of document.querySelectorAll("[data-testid=node-path]")) {
  found[card.dataset.node] = Array.from(card.querySelectorAll("[data-testid=branch]"),
    (b) => [b.getAttribute(arguments[0]), b.dataset.pod]);
}
return found;
"""


def drawn(driver: Any, attribute: str = "data-probability") -> dict[str, list[tuple[str, str]]]:
    """Per node on the page: its branches as (probability or share, pod)."""
    found = driver.execute_script(DRAWN_JS, attribute)
    return {node: [(value, pod) for value, pod in branches] for node, branches in found.items()}


def console_errors(driver: Any) -> list[Any]:
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
