"""`kubelab ui` in a real browser on the netns lab: Debian's headless Chromium, driven by selenium through
Debian's chromedriver (nothing downloaded). The first seed article's Service (three pods) is drawn on every
node as its real rules have it — KUBE-SVC -> three KUBE-SEP at 0.33333333349, 0.50000000000 and the rest,
each to its pod — and deleting a pod takes its branch off every node while the page stays open. A pod
clicked on the page shows `kubelab explain pod` as a per-node table: every node's scheduler verdict (the
same totals the CLI prints) and, on every node, the KUBE-SEP branch that a packet to the Service takes to
that pod. The screenshots are kept in the test's tmp dir (and copied to $KUBELAB_UI_SCREENSHOT when set,
which is how docs/ui-service-path.png is made); the page logs no console error.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from kubelab_cluster import Cluster, wait_for
from uibrowser import NEEDS_CHROMIUM, browser, console_errors, drawn, ui  # noqa: F401 - fixtures by name

MANIFEST = Path(__file__).resolve().parents[2] / "examples" / "clusterip-svc.yaml"
SERVICE = "default/clusterip-svc"
PODS = ["default/api-1", "default/api-2", "default/api-3"]

pytest.importorskip("selenium.webdriver")
pytestmark = NEEDS_CHROMIUM


def _apply_fresh(cluster: Cluster) -> None:
    """The manifest applied once the pods of an earlier test's delete are gone (apply would patch a
    terminating pod, not create a new one)."""
    wait_for("no api pod left from before", lambda: not [
        p for p in cluster.kubectl_json("get", "pods", "-l", "app=api-container")["items"]], timeout=120)
    cluster.kubectl("apply", "-f", str(MANIFEST))


def _three_branches(driver: Any, nodes: set[str]) -> dict[str, list[tuple[str, str]]] | None:
    now = drawn(driver)
    ok = set(now) == nodes and all(
        [p for p, _ in branches] == ["0.33333333349", "0.50000000000", "rest"]
        and sorted(pod for _, pod in branches) == PODS
        for branches in now.values())
    return now if ok else None


def test_the_seed_service_drawn_from_every_nodes_rules(cluster: Cluster, ui: str, browser: Any,  # noqa: F811
                                                       tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    nodes = set(cluster.state["nodes"])
    _apply_fresh(cluster)
    try:
        browser.get(f"{ui}#{SERVICE}")
        wait_for("three endpoints on every node's drawing", lambda: _three_branches(browser, nodes), timeout=120)
        shot = tmp_path / "ui-seed-three-endpoints.png"
        browser.save_screenshot(str(shot))
        if os.environ.get("KUBELAB_UI_SCREENSHOT"):
            shutil.copyfile(shot, os.environ["KUBELAB_UI_SCREENSHOT"])

        # The list finds it by a search, and the nodes show the pods.
        search = browser.find_element(By.CSS_SELECTOR, "[data-testid=search]")
        search.send_keys("clusterip")
        wait_for("the Service in the searched list", lambda: [
            li.get_attribute("data-key") for li in browser.find_elements(By.CSS_SELECTOR, "[data-testid=service]")
        ] == [SERVICE], timeout=30)
        pods_shown = {li.get_attribute("data-key") for li in browser.find_elements(By.CSS_SELECTOR, "[data-testid=pod]")}
        assert set(PODS) <= pods_shown

        kernel: dict[str, float] = {}
        stop = threading.Event()
        watcher = threading.Thread(target=_kernel_drops_branch, args=(cluster, kernel, stop), daemon=True)
        cluster.kubectl("delete", "pod", "api-2", "--wait=false")
        accepted_at = time.monotonic()  # kubectl has returned: the API server has the deletion
        watcher.start()

        def branch_gone() -> bool:
            now = drawn(browser)
            return set(now) == nodes and all(
                [p for p, _ in branches] == ["0.50000000000", "rest"]
                and sorted(pod for _, pod in branches) == ["default/api-1", "default/api-3"]
                for branches in now.values())

        # Polled often so the measurement below is close; the page itself is never polled by a timer.
        wait_for("api-2's branch gone from every node", branch_gone, timeout=120, interval=0.02)
        drawn_at = time.monotonic()
        stop.set()
        watcher.join(timeout=60)
        # Measurements for the report, not checks: from the API server's answer to the delete to the page
        # drawn without the branch on every node, and how much of that the page took after the last node's
        # kernel had dropped it (the rest is the cluster: endpoints controller, proxy agents' syncs).
        (tmp_path / "measurements.json").write_text(json.dumps({
            "delete_to_branch_gone_s": drawn_at - accepted_at,
            "delete_to_rules_dropped_everywhere_s": kernel["at"] - accepted_at if "at" in kernel else None,
            "rules_dropped_to_page_s": drawn_at - kernel["at"] if "at" in kernel else None}))
        browser.save_screenshot(str(tmp_path / "ui-seed-api-2-deleted.png"))
        assert shot.stat().st_size > 0

        assert console_errors(browser) == []
    finally:
        cluster.kubectl("delete", "-f", str(MANIFEST), "--wait=false", check=False)


def _kernel_drops_branch(cluster: Cluster, out: dict[str, float], stop: threading.Event) -> None:
    """For the measurement only: when every node's KUBE-SVC chain of the Service is down to two branches,
    read with iptables-save in each node's namespace (all nodes at once, one thread each)."""
    done: dict[str, float] = {}

    def one(node: str, netns: str) -> None:
        while not stop.is_set():
            text = subprocess.run(["ip", "netns", "exec", netns, "iptables-save", "-t", "nat"], capture_output=True,
                                  text=True, check=False).stdout
            jumps = [line for line in text.splitlines() if line.startswith("-A KUBE-SVC-")
                     and f'"{SERVICE} -> ' in line and "-j KUBE-SEP-" in line]
            if len(jumps) == 2:
                done[node] = time.monotonic()
                return

    threads = [threading.Thread(target=one, args=(node, info["netns"]), daemon=True)
               for node, info in cluster.state["nodes"].items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if len(done) == len(threads):
        out["at"] = max(done.values())


def _cli_totals(cluster: Cluster, pod: str) -> dict[str, str]:
    """`kubelab explain pod`'s TOTAL per feasible node, as the CLI prints it."""
    out = cluster.kubelab("explain", "pod", pod, "--data-dir", str(cluster.data_dir)).stdout
    totals = {}
    for line in out.splitlines():
        m = re.match(r"^(\S+)\s+passed\s+fits\s+.*?(\d+)(?:\s+<- .*)?$", line)
        if m:
            totals[m.group(1)] = m.group(2)
    return totals


def test_explain_pod_per_node_on_the_page(cluster: Cluster, ui: str, browser: Any) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    nodes = set(cluster.state["nodes"])
    _apply_fresh(cluster)
    try:
        browser.get(f"{ui}#{SERVICE}")
        wait_for("three endpoints on every node's drawing", lambda: _three_branches(browser, nodes), timeout=120)
        pod = wait_for("api-1 in the nodes' pod lists", lambda: next(
            (li for li in browser.find_elements(By.CSS_SELECTOR, "[data-testid=pod]")
             if li.get_attribute("data-key") == "default/api-1"), None), timeout=60)
        pod.click()

        def explained() -> tuple[dict[str, tuple[str, str, str]], dict[str, tuple[str, str]]] | None:
            scheduling = {row.get_attribute("data-node"): (
                row.get_attribute("data-fits"), *[td.text for td in row.find_elements(By.TAG_NAME, "td")][-2:])
                for row in browser.find_elements(By.CSS_SELECTOR, "[data-testid=explain-node]")}
            packets = {row.get_attribute("data-node"): (row.get_attribute("data-branch"), row.get_attribute("data-share"))
                       for row in browser.find_elements(By.CSS_SELECTOR, "[data-testid=explain-packet]")
                       if row.get_attribute("data-service") == SERVICE}
            return (scheduling, packets) if set(scheduling) == nodes and set(packets) == nodes else None

        scheduling, packets = wait_for("the explain tables for api-1", explained, timeout=60)
        bound = cluster.kubectl_json("get", "pod", "api-1")["spec"]["nodeName"]
        # The scheduler half is `kubelab explain pod`'s own computation: the same totals the CLI prints,
        # and the node it picked is the node the pod is on.
        assert {node: total for node, (fits, total, _) in scheduling.items() if fits == "yes"} == _cli_totals(cluster, "api-1")
        assert [node for node, (_, _, mark) in scheduling.items() if mark == "picked"] == [bound]
        # The packet half: on every node, a KUBE-SEP branch of the Service's KUBE-SVC leads to api-1, with
        # one of the three probabilities that node's rules carry.
        assert all(chain.startswith("KUBE-SEP-") and share in ("0.33333333349", "0.50000000000", "rest")
                   for chain, share in packets.values()), packets
        assert console_errors(browser) == []
    finally:
        cluster.kubectl("delete", "-f", str(MANIFEST), "--wait=false", check=False)
