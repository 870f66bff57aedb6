"""The end-to-end harness itself: when `kubelab up` dies during start-up, Cluster.start says so at once
with its exit code and log, instead of polling until its timeout."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from kubelab_cluster import Cluster, GiveUp


def test_a_cluster_that_cannot_start_is_reported_at_once(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path / "data")
    (tmp_path / "data").mkdir()
    taken = socket.socket()
    taken.bind(("127.0.0.1", cluster.port))  # its API port, held: `kubelab up` refuses to start
    taken.listen()
    try:
        # Before GiveUp this waited the whole timeout and then reported only "timed out".
        with pytest.raises(GiveUp, match="kubelab up exited with 1") as failed:
            cluster.start(timeout=300)
        assert "127.0.0.1:" + str(cluster.port) in str(failed.value)  # the log says which address
    finally:
        taken.close()
        cluster.stop()
