"""`kubectl logs` as kubelet answers it: the container's CRI log files (crilog.py) read back with the
options of PodLogOptions (pkg/kubelet/kuberuntime/logs/logs.go ReadLogs). As kubelet, only the
container's current file is read: what the runtime rotated away (`<n>.log.<time>`, gzipped after the
first) is not shown.

`tailLines` counts whole lines from the end, `sinceTime`/`sinceSeconds` drop lines written before, and
`limitBytes` cuts the output (the last line too) once that many bytes were sent; `timestamps` puts each
line's CRI time in front of it. `follow` keeps reading the current file as it grows until the container
stops running, and starts the new file from its beginning when the runtime rotates the one it
follows (kubelet's waitLogs sees the rename and reopens). `previous` reads the last terminated
instance's file (restartCount - 1).
"""

from __future__ import annotations

import asyncio
import collections
import datetime
import os
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kubelab.models import ContainerStatus, Pod

from .crilog import LogLine, container_log_dir, parse_line

FOLLOW_POLL = 0.2  # seconds between looks at a followed file (kubelet waits on fsnotify)
READ_SIZE = 64 * 1024


@dataclass(frozen=True, slots=True)
class LogOptions:
    follow: bool = False
    previous: bool = False
    timestamps: bool = False
    tail_lines: int | None = None
    limit_bytes: int | None = None
    since: datetime.datetime | None = None

    @classmethod
    def from_query(cls, query: Mapping[str, Sequence[str]], *, now: datetime.datetime | None = None) -> LogOptions:
        """PodLogOptions from the kubelet's query (the API server validated them); ValueError when bad."""
        def first(name: str) -> str:
            values = query.get(name) or []
            return values[0] if values else ""

        def flag(name: str) -> bool:
            return first(name).lower() in ("1", "t", "true")

        def number(name: str) -> int | None:
            text = first(name)
            return int(text) if text else None

        since: datetime.datetime | None = None
        if first("sinceTime"):
            since = parse_time(first("sinceTime"))
        elif first("sinceSeconds"):
            since = (now or datetime.datetime.now(datetime.UTC)) - datetime.timedelta(seconds=int(first("sinceSeconds")))
        return cls(follow=flag("follow"), previous=flag("previous"), timestamps=flag("timestamps"),
                   tail_lines=number("tailLines"), limit_bytes=number("limitBytes"), since=since)


def parse_time(text: str) -> datetime.datetime:
    """RFC 3339 with up to nanoseconds (Python keeps microseconds); ValueError when it is not."""
    text = text.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    main, _, zone = text.partition("+") if "+" in text[10:] else (text, "", "")
    if "." in main:
        head, fraction = main.split(".", 1)
        main = f"{head}.{fraction[:6].ljust(6, '0')}"
    return datetime.datetime.fromisoformat(main + ("+" + zone if zone else ""))


def _status(pod: Pod, container: str) -> ContainerStatus | None:
    status = pod.status
    for s in [*(status.init_container_statuses or []), *(status.container_statuses or [])] if status else []:
        if s.name == container:
            return s
    return None


def container_problem(pod: Pod, container: str, *, previous: bool) -> str | None:
    """kubelet's validateContainerLogStatus: why there are no logs to read (kube's words), or None."""
    name = pod.metadata.name
    status = _status(pod, container)
    state = (status.state if status else None) or {}
    last = (status.last_state if status else None) or {}
    if previous:
        if not last.get("terminated"):
            return f'previous terminated container "{container}" in pod "{name}" not found'
        return None
    if state.get("running") or state.get("terminated"):
        return None
    if status is not None and last.get("terminated"):
        return None  # waiting to restart: the last instance's file is the current one until then
    reason = (state.get("waiting") or {}).get("reason") or "ContainerCreating"
    return f'container "{container}" in pod "{name}" is waiting to start: {reason}'


def is_running(pod: Pod, container: str) -> bool:
    status = _status(pod, container)
    return bool(status and (status.state or {}).get("running"))


def log_files(root: Path, pod: Pod, container: str, *, previous: bool) -> list[Path]:
    status = _status(pod, container)
    restarts = (status.restart_count or 0) if status else 0
    if previous:
        restarts -= 1
    elif status is not None and not (status.state or {}).get("running") and not (status.state or {}).get(
            "terminated") and restarts > 0:
        restarts -= 1  # waiting to restart: the newest file is the last instance's
    meta = pod.metadata
    directory = container_log_dir(root, meta.namespace or "", meta.name or "", meta.uid or "", container)
    return [directory / f"{restarts}.log"]


def _lines(data: bytes) -> Iterator[LogLine]:
    for raw in data.split(b"\n"):
        if raw:
            try:
                yield parse_line(raw)
            except ValueError:
                continue  # kubelet skips what it cannot parse, and says so in its own log


def _render(line: LogLine, options: LogOptions) -> bytes:
    text = line.content if line.partial else line.content + b"\n"
    return (line.time.encode() + b" " + text) if options.timestamps else text


def _keep(line: LogLine, options: LogOptions) -> bool:
    if options.since is None:
        return True
    try:
        return parse_time(line.time) >= options.since
    except ValueError:
        return True


async def stream(files: Sequence[Path], options: LogOptions, *,
                 still_running: Callable[[], bool] = lambda: False) -> AsyncIterator[bytes]:
    """The log's bytes as kubelet sends them, chunk by chunk; with `follow`, until the container stops."""
    budget = options.limit_bytes

    def cut(chunk: bytes) -> bytes:
        nonlocal budget
        if budget is None:
            return chunk
        chunk = chunk[:budget]
        budget -= len(chunk)
        return chunk

    # What exists now: read whole (files are rotated at 10 MiB), the tail taken over all of them.
    selected: collections.deque[LogLine] | list[LogLine]
    selected = collections.deque(maxlen=options.tail_lines) if options.tail_lines is not None else []
    position = 0
    last = files[-1] if files else None
    for path in files:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue
        complete = data[:data.rfind(b"\n") + 1]
        if path == last:
            position = len(complete)
        selected.extend(line for line in _lines(complete) if _keep(line, options))
    if options.tail_lines == 0:
        selected.clear()
    out = b"".join(_render(line, options) for line in selected)
    chunk = cut(out)
    if chunk:
        yield chunk
    if not options.follow or last is None:
        return
    try:
        inode: int | None = last.stat().st_ino
    except FileNotFoundError:
        inode = None
    while budget is None or budget > 0:
        data = b""
        try:
            with last.open("rb") as f:
                current = os.fstat(f.fileno()).st_ino
                if inode is not None and current != inode:
                    position = 0  # rotated: the runtime's new file, from its beginning
                inode = current
                f.seek(position)
                data = f.read(READ_SIZE)
        except FileNotFoundError:
            pass
        complete = data[:data.rfind(b"\n") + 1]
        if complete:
            position += len(complete)
            chunk = cut(b"".join(_render(line, options) for line in _lines(complete) if _keep(line, options)))
            if chunk:
                yield chunk
            continue
        if not still_running():
            return
        await asyncio.sleep(FOLLOW_POLL)
