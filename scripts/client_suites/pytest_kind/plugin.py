"""pytest-kind's command-line options, so a suite's ``request.config.getoption("keep_cluster")`` works."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kind")
    group.addoption("--cluster-name", default="pytest-kind", help="ignored: the cluster is kubelab's")
    group.addoption("--keep-cluster", action="store_true", help="ignored: scripts/client-suites.sh stops kubelab")
