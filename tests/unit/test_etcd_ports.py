"""kubelab's etcd launcher when the port it chose is taken before etcd binds it (another process won the
race): it starts again on other ports, and never mistakes another etcd on that port for its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kubelab import etcd as etcd_module
from kubelab.etcd import Etcd, PortTaken, free_port


@pytest.fixture
def other(tmp_path: Path) -> Iterator[Etcd]:
    server = Etcd(tmp_path / "other").start()
    try:
        yield server
    finally:
        server.stop()


def test_ports_taken_before_etcd_binds_them_are_chosen_again(tmp_path: Path, other: Etcd,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # The first choice is the other etcd's two ports, as if it had taken them in between.
    choices = iter([other.client_port, other.peer_port])
    monkeypatch.setattr(etcd_module, "free_port", lambda: next(choices, None) or free_port())
    mine = Etcd(tmp_path / "mine").start()
    try:
        assert mine.client_port not in (other.client_port, other.peer_port)
        assert mine.process is not None and mine.process.poll() is None
        assert mine._answers_as_itself() and other._answers_as_itself()  # each on a port of its own
    finally:
        mine.stop()
    assert other.process is not None and other.process.poll() is None  # the other one was left alone


def test_given_ports_that_are_taken_fail_clearly(tmp_path: Path, other: Etcd) -> None:
    taken = Etcd(tmp_path / "mine", client_port=other.client_port, peer_port=free_port())
    with pytest.raises(PortTaken):
        taken.start()
    assert taken.process is None  # stopped
    assert other.process is not None and other.process.poll() is None
