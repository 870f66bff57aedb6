"""Container log files as kubelet keeps them: where each lives, and the CRI line format inside.

kubelet (pkg/kubelet/kuberuntime/kuberuntime_manager.go, BuildPodLogsDirectory/BuildContainerLogsDirectory)
puts a pod's logs under ``/var/log/pods/<namespace>_<name>_<uid>/<container>/<restartCount>.log``; the
runtime writes one line per chunk of output in the CRI log format (k8s.io/cri-api, pkg/kubelet/kuberuntime/
logs): ``<RFC 3339 time with nanoseconds> <stdout|stderr> <F|P> <content>``, ``F`` for a full line, ``P`` for
a partial one (a line longer than the runtime's buffer, continued on the next). kubelab's root is the lab's
state directory instead of /var/log/pods; the layout below it is kubelet's.

The runtime writes these files (and rotates them); the kubelet API reads them for ``kubectl logs``.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Stream = Literal["stdout", "stderr"]
FULL = b"F"
PARTIAL = b"P"


def pod_log_dir(root: Path, namespace: str, name: str, uid: str) -> Path:
    return root / f"{namespace}_{name}_{uid}"


def container_log_dir(root: Path, namespace: str, name: str, uid: str, container: str) -> Path:
    return pod_log_dir(root, namespace, name, uid) / container


def container_log_path(root: Path, namespace: str, name: str, uid: str, container: str, restart_count: int) -> Path:
    return container_log_dir(root, namespace, name, uid, container) / f"{restart_count}.log"


def timestamp(when: datetime.datetime | None = None) -> str:
    """RFC 3339 with nanoseconds in UTC, as the CRI writes it (Python keeps microseconds: 3 zeros follow)."""
    when = when or datetime.datetime.now(datetime.UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"


def format_line(stream: Stream, content: bytes, *, partial: bool = False,
                when: datetime.datetime | None = None) -> bytes:
    """One CRI log line for `content` (without its newline)."""
    tag = PARTIAL if partial else FULL
    return b"%s %s %s %s\n" % (timestamp(when).encode(), stream.encode(), tag, content)


@dataclass(frozen=True, slots=True)
class LogLine:
    time: str            # as written: RFC 3339 with nanoseconds
    stream: Stream
    partial: bool
    content: bytes       # without the line's newline


def parse_line(line: bytes) -> LogLine:
    """A CRI log line back into its parts; raises ValueError on anything else."""
    line = line.rstrip(b"\n")
    parts = line.split(b" ", 3)
    if len(parts) < 3 or parts[1] not in (b"stdout", b"stderr") or parts[2] not in (FULL, PARTIAL):
        raise ValueError(f"not a CRI log line: {line[:80]!r}")
    stream: Stream = "stdout" if parts[1] == b"stdout" else "stderr"
    return LogLine(parts[0].decode("ascii", "replace"), stream, parts[2] == PARTIAL,
                   parts[3] if len(parts) == 4 else b"")
