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


def test_an_etcd_that_crashes_before_writing_anything_is_started_again(tmp_path: Path) -> None:
    """A Go binary killed by SIGSEGV at once, with an empty log, was seen on a loaded machine: the launcher
    starts it again. The first run here is a real process dying of SIGSEGV; the second execs etcd."""
    marker = tmp_path / "crashed-once"
    wrapper = tmp_path / "etcd-crashing-once"
    wrapper.write_text(f"#!/bin/sh\nif [ ! -e {marker} ]; then touch {marker}; kill -SEGV $$; fi\n"
                       f'exec {etcd_module.find_etcd()} "$@"\n')
    wrapper.chmod(0o755)
    server = Etcd(tmp_path / "etcd")
    server.binary = str(wrapper)
    server.start()
    try:
        assert marker.exists()  # it did crash once
        assert server.process is not None and server.process.poll() is None and server._answers_as_itself()
    finally:
        server.stop()


def test_an_etcd_slow_to_open_its_backend_is_waited_for(tmp_path: Path) -> None:
    """etcd prints "another etcd process is using ... and holds the file lock, or loading backend file is
    taking >10 seconds" when its own backend is slow to open (a loaded machine) and goes on: the launcher
    waits for it instead of calling the data dir taken (it did, and a test module's etcd failed to start)."""
    wrapper = tmp_path / "etcd-slow-backend"
    wrapper.write_text("#!/bin/sh\n"
                       "echo '{\"level\":\"warn\",\"msg\":\"another etcd process is using the data dir and holds "
                       "the file lock, or loading backend file is taking >10 seconds\"}' >&2\n"
                       f'exec {etcd_module.find_etcd()} "$@"\n')
    wrapper.chmod(0o755)
    server = Etcd(tmp_path / "etcd")
    server.binary = str(wrapper)
    server.start()
    try:
        assert server.process is not None and server.process.poll() is None and server._answers_as_itself()
    finally:
        server.stop()

