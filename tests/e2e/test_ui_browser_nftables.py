"""`kubelab ui` on a cluster whose proxy agents run kube-proxy's nftables mode (`kubelab up --proxy-mode
nftables`), in Debian's headless Chromium. The page draws the first seed article's Service from every
node's real table (`nft -j list table ip kube-proxy` in the node's namespace): the `service-ips` element
-> the Service's chain -> `numgen random mod 3 vmap` -> three endpoint chains, each with share 1/3, each
to its pod; deleting a pod leaves two branches (1/2) on every node while the page stays open; the pod's
explain table shows, per node, the vmap arm a packet to the Service takes to it. No console error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubelab_cluster import Cluster, wait_for
from uibrowser import NEEDS_CHROMIUM, browser, console_errors, drawn, ui  # noqa: F401 - fixtures by name

KUBELAB_UP_ARGS = ("--proxy-mode", "nftables")
MANIFEST = Path(__file__).resolve().parents[2] / "examples" / "clusterip-svc.yaml"
SERVICE = "default/clusterip-svc"

pytest.importorskip("selenium.webdriver")
pytestmark = NEEDS_CHROMIUM


def _shares(driver: Any, nodes: set[str], pods: list[str], share: str) -> bool:
    from selenium.webdriver.common.by import By

    now = drawn(driver, "data-share")
    numgen = {card.get_attribute("data-node"): [e.text for e in card.find_elements(By.CSS_SELECTOR, "[data-testid=numgen]")]
              for card in driver.find_elements(By.CSS_SELECTOR, "[data-testid=node-path]")}
    return set(now) == nodes and all(
        [s for s, _ in branches] == [share] * len(pods) and sorted(pod for _, pod in branches) == pods
        and numgen[node] == [f"numgen random mod {len(pods)} vmap"]
        for node, branches in now.items())


def test_the_seed_service_through_every_nodes_nftables(cluster: Cluster, ui: str, browser: Any,  # noqa: F811
                                                       tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    nodes = set(cluster.state["nodes"])
    cluster.kubectl("apply", "-f", str(MANIFEST))
    try:
        browser.get(f"{ui}#{SERVICE}")
        wait_for("three 1/3 branches on every node's drawing", lambda: _shares(
            browser, nodes, ["default/api-1", "default/api-2", "default/api-3"], "1/3"), timeout=120)
        modes = {c.get_attribute("data-mode") for c in browser.find_elements(By.CSS_SELECTOR, "[data-testid=node-path]")}
        assert modes == {"nftables"}
        browser.save_screenshot(str(tmp_path / "ui-nftables-three-endpoints.png"))

        pod = next(li for li in browser.find_elements(By.CSS_SELECTOR, "[data-testid=pod]")
                   if li.get_attribute("data-key") == "default/api-1")
        pod.click()

        def arms() -> dict[str, tuple[str, str]] | None:
            rows = {row.get_attribute("data-node"): (row.get_attribute("data-branch"), row.get_attribute("data-share"))
                    for row in browser.find_elements(By.CSS_SELECTOR, "[data-testid=explain-packet]")
                    if row.get_attribute("data-service") == SERVICE}
            return rows if set(rows) == nodes else None

        found = wait_for("api-1's vmap arm on every node", arms, timeout=60)
        ip = cluster.kubectl_json("get", "pod", "api-1")["status"]["podIP"]
        assert all(chain.startswith("endpoint-") and chain.endswith(f"__{ip}/5000") and share == "1/3"
                   for chain, share in found.values()), found

        cluster.kubectl("delete", "pod", "api-2", "--wait=false")
        wait_for("api-2's branch gone from every node", lambda: _shares(
            browser, nodes, ["default/api-1", "default/api-3"], "1/2"), timeout=120)
        browser.save_screenshot(str(tmp_path / "ui-nftables-api-2-deleted.png"))
        assert console_errors(browser) == []
    finally:
        cluster.kubectl("delete", "-f", str(MANIFEST), "--wait=false", check=False)
