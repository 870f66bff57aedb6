"""Writing one container's log file, and rotating it as kubelet's container log manager does.

The runtime hands `ContainerLog.write` whatever it read from the container's stdout or stderr; each
complete line becomes one CRI line (`crilog.format_line`), a line longer than `MAX_LINE` is cut into
partial (``P``) lines as containerd cuts them, and a trailing fragment waits for its newline (at most
`MAX_LINE` bytes per stream). Memory is bounded by that, whatever a container prints.

Rotation (pkg/kubelet/logs/container_log_manager.go): once the file reaches containerLogMaxSize (10Mi)
it is renamed ``<n>.log.<YYYYMMDD-hhmmss>`` and a new ``<n>.log`` started; rotated files but the newest
are gzipped (``.gz``); the oldest are removed so that at most containerLogMaxFiles (5) remain, the live
file included. kubelet checks every 10 s and asks the runtime to reopen; kubelab's runtime is the writer,
so it rotates the moment the limit is passed (the same files, and no file ever much above the limit).
"""

from __future__ import annotations

import contextlib
import datetime
import gzip
import os
import shutil
import threading
from pathlib import Path

from . import crilog

MAX_SIZE = 10 * 1024 * 1024  # containerLogMaxSize 10Mi
MAX_FILES = 5                 # containerLogMaxFiles
MAX_LINE = 16 * 1024          # containerd's max_container_log_line_size
ROTATED_TIME_FORMAT = "%Y%m%d-%H%M%S"  # kubelet's "20060102-150405"


class ContainerLog:
    """The log file of one run of a container. Not thread-safe: one event loop writes it."""

    def __init__(self, path: Path, *, max_size: int = MAX_SIZE, max_files: int = MAX_FILES) -> None:
        self.path = path
        self.max_size = max_size
        self.max_files = max_files
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "ab")  # noqa: SIM115 - closed in close()
        self._size = self._file.tell()
        self._pending: dict[crilog.Stream, bytes] = {}
        self._compressing = threading.Lock()
        self._dirty = threading.Event()
        self._last_rotated: datetime.datetime | None = None

    def write(self, stream: crilog.Stream, data: bytes) -> None:
        # One timestamp per chunk read, formatted once: a container printing 100 MB is a million lines.
        stamp = crilog.timestamp().encode()
        full = b"%s %s %s " % (stamp, stream.encode(), crilog.FULL)
        partial = b"%s %s %s " % (stamp, stream.encode(), crilog.PARTIAL)
        lines = (self._pending.pop(stream, b"") + data).split(b"\n")
        rest = lines.pop()  # after the last newline: a fragment that waits for its end
        out: list[bytes] = []
        for line in lines:
            while len(line) > MAX_LINE:
                out.append(partial + line[:MAX_LINE] + b"\n")
                line = line[MAX_LINE:]
            out.append(full + line + b"\n")
        while len(rest) > MAX_LINE:
            out.append(partial + rest[:MAX_LINE] + b"\n")
            rest = rest[MAX_LINE:]
        if rest:
            self._pending[stream] = rest
        self._emit(b"".join(out))

    def end(self, stream: crilog.Stream) -> None:
        """The stream closed: a fragment without a newline is written as a full line (containerd does)."""
        rest = self._pending.pop(stream, b"")
        if rest:
            self._emit(crilog.format_line(stream, rest))

    def close(self) -> None:
        for stream in list(self._pending):
            self.end(stream)
        self._file.close()

    def _emit(self, data: bytes) -> None:
        if not data:
            return
        if self._file.closed:
            return
        self._file.write(data)
        self._file.flush()
        self._size += len(data)
        if self._size >= self.max_size:
            self.rotate()

    def rotate(self) -> None:
        self._file.close()
        # kubelet's name, to the second; a container printing faster than 10 MiB a second would reuse one
        # (kubelet, checking every 10 s, never does): the next free second keeps names unique and ordered.
        when = datetime.datetime.now().replace(microsecond=0)
        if self._last_rotated is not None and when <= self._last_rotated:
            when = self._last_rotated + datetime.timedelta(seconds=1)
        while True:
            rotated = Path(f"{self.path}.{when.strftime(ROTATED_TIME_FORMAT)}")
            if not rotated.exists() and not rotated.with_name(rotated.name + ".gz").exists():
                break
            when += datetime.timedelta(seconds=1)
        os.replace(self.path, rotated)
        self._last_rotated = when
        self._file = open(self.path, "ab")  # noqa: SIM115 - closed in close()
        self._size = 0
        self._dirty.set()
        if self._compressing.acquire(blocking=False):
            # gzip of 10 MiB takes a good fraction of a second: not on the event loop.
            threading.Thread(target=self._tidy, name=f"log-rotate-{self.path.parent.name}", daemon=True).start()

    def _tidy(self) -> None:
        try:
            while self._dirty.is_set():
                self._dirty.clear()
                tidy_rotated(self.path, self.max_files)
        finally:
            self._compressing.release()
        if self._dirty.is_set() and self._compressing.acquire(blocking=False):
            self._tidy()  # a rotation came between the last pass and the release


def rotated_files(path: Path) -> list[Path]:
    """`path`'s rotated files, oldest first (their timestamps sort as text)."""
    prefix = path.name + "."
    return sorted((p for p in path.parent.iterdir() if p.name.startswith(prefix) and not p.name.endswith(".tmp")),
                  key=lambda p: p.name.removesuffix(".gz"))


def tidy_rotated(path: Path, max_files: int) -> None:
    """Remove the oldest rotated files beyond `max_files` (the live one counts), gzip all but the newest."""
    rotated = rotated_files(path)
    while rotated and len(rotated) + 1 > max_files:
        rotated.pop(0).unlink(missing_ok=True)
    for old in rotated[:-1]:
        if old.name.endswith(".gz"):
            continue
        tmp = old.with_name(old.name + ".gz.tmp")
        with contextlib.suppress(FileNotFoundError):
            with open(old, "rb") as src, gzip.open(tmp, "wb", compresslevel=1) as dst:
                shutil.copyfileobj(src, dst, 1024 * 1024)
            os.replace(tmp, old.with_name(old.name + ".gz"))
            old.unlink()
