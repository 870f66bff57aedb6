"""What the tests read of a process from /proc: whether it still runs, and its parent."""

from __future__ import annotations

from pathlib import Path


def _stat_fields(pid: int) -> list[str]:
    # After the command name's closing parenthesis (the name may hold spaces and parentheses itself).
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def alive(pid: int) -> bool:
    """Running, not a zombie waiting to be reaped nor gone."""
    try:
        return _stat_fields(pid)[0] not in ("Z", "X")
    except OSError:
        return False


def parent(pid: int) -> int:
    return int(_stat_fields(pid)[1])
