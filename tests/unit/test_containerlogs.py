"""Container log files: CRI lines, partial lines, and rotation as kubelet's container log manager does
it (kubeletstub/containerlogs.py)."""

from __future__ import annotations

import gzip
import re
import time
from pathlib import Path

from kubeletstub import crilog
from kubeletstub.containerlogs import MAX_LINE, ContainerLog, rotated_files


def lines(path: Path) -> list[crilog.LogLine]:
    return [crilog.parse_line(raw) for raw in path.read_bytes().splitlines()]


def test_chunks_become_cri_lines(tmp_path: Path) -> None:
    log = ContainerLog(tmp_path / "0.log")
    log.write("stdout", b"one\ntw")
    log.write("stderr", b"err\n")
    log.write("stdout", b"o\nthree")
    log.close()
    got = [(ln.stream, ln.partial, ln.content) for ln in lines(tmp_path / "0.log")]
    assert got == [("stdout", False, b"one"), ("stderr", False, b"err"), ("stdout", False, b"two"),
                   ("stdout", False, b"three")]


def test_a_long_line_is_cut_into_partial_lines(tmp_path: Path) -> None:
    log = ContainerLog(tmp_path / "0.log")
    log.write("stdout", b"x" * (MAX_LINE * 2 + 5))  # no newline yet: bounded all the same
    log.write("stdout", b"\n")
    log.close()
    got = [(ln.partial, len(ln.content)) for ln in lines(tmp_path / "0.log")]
    assert got == [(True, MAX_LINE), (True, MAX_LINE), (False, 5)]


def test_rotation_keeps_at_most_max_files_and_gzips_the_older(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    log = ContainerLog(path, max_size=1000, max_files=3)
    for i in range(100):
        log.write("stdout", b"%04d %s\n" % (i, b"y" * 95))
    log.close()
    deadline = time.monotonic() + 30
    while log._compressing.locked() and time.monotonic() < deadline:  # the tidy thread finishing
        time.sleep(0.05)
    rotated = rotated_files(path)
    assert len(rotated) == 2  # + the live file: containerLogMaxFiles
    assert re.fullmatch(r"0\.log\.\d{8}-\d{6}\.gz", rotated[0].name)
    assert re.fullmatch(r"0\.log\.\d{8}-\d{6}", rotated[1].name)
    newest = [crilog.parse_line(raw).content for raw in gzip.decompress(rotated[0].read_bytes()).splitlines()]
    newest += [ln.content for ln in lines(rotated[1])] + [ln.content for ln in lines(path)]
    assert newest[-1].startswith(b"0099 ")  # nothing lost at the end, in order
    numbers = [int(c[:4]) for c in newest]
    assert numbers == sorted(numbers) and numbers == list(range(numbers[0], 100))
    assert all(p.stat().st_size < 1000 + 200 for p in [rotated[1], path])
