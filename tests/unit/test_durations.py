"""Durations as kube's flags take them (`--event-ttl 1h`), and the flag's refusals."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kubelab.timeutil import parse_duration


@pytest.mark.parametrize(("text", "seconds"), [
    ("1h", 3600.0), ("1h0m0s", 3600.0), ("90s", 90.0), ("2m30s", 150.0), ("1.5m", 90.0), ("500ms", 0.5),
    ("45", 45.0), ("0.25", 0.25)])
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "1x", "h", "1h2", "-", "1 h"])
def test_malformed_durations_are_refused_with_gos_words(text: str) -> None:
    with pytest.raises(ValueError, match="time: invalid duration"):
        parse_duration(text)


def test_event_ttl_flag_refuses_a_bad_duration_before_starting() -> None:
    done = subprocess.run([sys.executable, "-m", "kubelab", "apiserver", "--etcd-servers", "http://127.0.0.1:1",
                           "--event-ttl", "1x"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert 'argument --event-ttl: time: invalid duration "1x"' in done.stderr
