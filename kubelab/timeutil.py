"""Timestamps as Kubernetes writes them (RFC 3339, UTC, `Z`) and ages as kubectl prints them."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime


def now() -> datetime:
    return datetime.now(UTC)


_current: tuple[int, str] = (-1, "")  # (a second of the clock, that second as rfc3339 writes it)


def rfc3339(when: datetime | None = None) -> str:
    """metav1.Time: whole seconds, `2024-01-01T00:00:00Z`. The current time is formatted once per second
    (the API server stamps several fields of every write with it)."""
    global _current
    if when is None:
        second = int(time.time())
        if second != _current[0]:
            _current = (second, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second)))
        return _current[1]
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_micro(when: datetime | None = None) -> str:
    """metav1.MicroTime: six fractional digits, as Leases and events.k8s.io use."""
    return (when or now()).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# ASCII digits only, as Go reads them: `\d` and float() would also take '²' or '١' (and float() "nan",
# "inf" and "1_0").
_NUMBER = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
_SECONDS = re.compile(f"[-+]?{_NUMBER}", re.ASCII)
_DURATION_PART = re.compile(f"({_NUMBER})(h|ms|m|s)", re.ASCII)
_DURATION_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_duration(text: str) -> float:
    """Seconds of a duration as kube's flags take one (Go's time.ParseDuration: `1h`, `1h0m0s`, `90s`,
    `1.5m`, `500ms`, an optional sign); a bare number is seconds. ValueError for anything else."""
    text = text.strip()
    if not text:
        raise ValueError('time: invalid duration ""')
    if _SECONDS.fullmatch(text):
        return float(text)
    sign, body = (-1.0, text[1:]) if text[0] == "-" else (1.0, text[1:] if text[0] == "+" else text)
    total, at = 0.0, 0
    while at < len(body) or at == 0:
        match = _DURATION_PART.match(body, at)
        if match is None:
            raise ValueError(f'time: invalid duration "{text}"')
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        at = match.end()
    return sign * total


def parse(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        # Not fromisoformat's own "Z" support: it refuses a date-only "2024-01-01Z", which this accepts.
        return datetime.fromisoformat(text.replace("Z", "+00:00"))  # noqa: FURB162
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    """apimachinery's duration.HumanDuration, the AGE column of kubectl."""
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    s = int(seconds)
    if s < 60 * 2:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rem = s % 60
        return f"{minutes}m{rem}s" if rem else f"{minutes}m"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        rem = minutes % 60
        return f"{hours}h{rem}m" if rem else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rem = hours % 24
        return f"{hours // 24}d{rem}h" if rem else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def age(timestamp: str | None, at: datetime | None = None) -> str:
    when = parse(timestamp)
    if when is None:
        return "<unknown>"
    return human_duration(((at or now()) - when).total_seconds())
