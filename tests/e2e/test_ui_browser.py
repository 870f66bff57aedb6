"""`kubelab ui` in a real browser on the netns lab: Debian's headless Chromium, driven by selenium through
Debian's chromedriver (nothing downloaded). The first seed article's Service (three pods) is drawn on every
node as its real rules have it — KUBE-SVC -> three KUBE-SEP at 0.33333333349, 0.50000000000 and the rest,
each to its pod — and deleting a pod takes its branch off every node while the page stays open. The
screenshots are kept in the test's tmp dir; the page logs no console error.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubelab_cluster import Cluster, wait_for

MANIFEST = Path(__file__).resolve().parents[2] / "examples" / "clusterip-svc.yaml"
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
SERVICE = "default/clusterip-svc"

webdriver = pytest.importorskip("selenium.webdriver")
pytestmark = pytest.mark.skipif(not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)),
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


def drawn(driver: Any) -> dict[str, list[tuple[str, str]]]:
    """Per node on the page: its branches as (probability, pod)."""
    from selenium.webdriver.common.by import By

    found: dict[str, list[tuple[str, str]]] = {}
    for card in driver.find_elements(By.CSS_SELECTOR, "[data-testid=node-path]"):
        found[card.get_attribute("data-node")] = [
            (b.get_attribute("data-probability"), b.get_attribute("data-pod"))
            for b in card.find_elements(By.CSS_SELECTOR, "[data-testid=branch]")]
    return found


def test_the_seed_service_drawn_from_every_nodes_rules(cluster: Cluster, ui: str, browser: Any,
                                                       tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    nodes = set(cluster.state["nodes"])
    cluster.kubectl("apply", "-f", str(MANIFEST))
    try:
        browser.get(f"{ui}#{SERVICE}")

        def three_branches() -> dict[str, list[tuple[str, str]]] | None:
            now = drawn(browser)
            ok = set(now) == nodes and all(
                [p for p, _ in branches] == ["0.33333333349", "0.50000000000", "rest"]
                and sorted(pod for _, pod in branches) == ["default/api-1", "default/api-2", "default/api-3"]
                for branches in now.values())
            return now if ok else None

        wait_for("three endpoints on every node's drawing", three_branches, timeout=120)
        browser.save_screenshot(str(tmp_path / "ui-seed-three-endpoints.png"))

        # The list finds it by a search, and the nodes show the pods.
        search = browser.find_element(By.CSS_SELECTOR, "[data-testid=search]")
        search.send_keys("clusterip")
        wait_for("the Service in the searched list", lambda: [
            li.get_attribute("data-key") for li in browser.find_elements(By.CSS_SELECTOR, "[data-testid=service]")
        ] == [SERVICE], timeout=30)
        pods_shown = {li.text.split(" ")[0] for li in browser.find_elements(By.CSS_SELECTOR, "[data-testid=pod]")}
        assert {"default/api-1", "default/api-2", "default/api-3"} <= pods_shown

        deleted_at = time.monotonic()
        cluster.kubectl("delete", "pod", "api-2", "--wait=false")

        def branch_gone() -> bool:
            now = drawn(browser)
            return set(now) == nodes and all(
                [p for p, _ in branches] == ["0.50000000000", "rest"]
                and sorted(pod for _, pod in branches) == ["default/api-1", "default/api-3"]
                for branches in now.values())

        wait_for("api-2's branch gone from every node", branch_gone, timeout=120)
        # A measurement for the report, not a check: from kubectl's delete to the page without the branch
        # (polled every 0.25 s by wait_for, so up to that much late).
        (tmp_path / "measurements.json").write_text(json.dumps({"delete_to_branch_gone_s": time.monotonic() - deleted_at}))
        browser.save_screenshot(str(tmp_path / "ui-seed-api-2-deleted.png"))
        assert (tmp_path / "ui-seed-three-endpoints.png").stat().st_size > 0

        errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
        assert errors == [], errors
    finally:
        cluster.kubectl("delete", "-f", str(MANIFEST), "--wait=false", check=False)
