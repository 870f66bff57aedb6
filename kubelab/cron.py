"""Cron schedules as CronJobs use them: robfig/cron v3's ParseStandard, and the next time a schedule fires.

kube-apiserver validates `spec.schedule` with cron.ParseStandard and the CronJob controller computes start
times with the same parser, so both sides of kubelab use this module. What ParseStandard accepts:

* five fields, minute hour day-of-month month day-of-week, separated by whitespace; each field a comma
  list of `*` or `?`, `N`, `N-M`, each optionally `/STEP` (`N/STEP` means `N-max/STEP`); months `jan`..`dec`
  and weekdays `sun`..`sat` by name, in any case; day-of-week 0-6 (7 is refused, as robfig does);
* the descriptors @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly, and `@every <duration>`
  (Go's time.ParseDuration; kube's validation accepts it, so kubelab does too);
* a `TZ=` or `CRON_TZ=` prefix, which the API then refuses (the timeZone field replaces it).

Errors carry robfig's wording ("expected exactly 5 fields, found 1: [foo]"), which kube puts in its 422.
Day-of-month and day-of-week combine as cron does: both must match when either is `*`, else either may.
Pure: no clock; `next_time` takes the instant to start from.
"""

from __future__ import annotations

import math
import zoneinfo
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from kubelab import timeutil, validation


class CronError(ValueError):
    """A schedule ParseStandard refuses; str() is robfig's message."""


@dataclass(frozen=True)
class _Bounds:
    low: int
    high: int
    names: dict[str, int]


_MONTHS = {name: i for i, name in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1)}
_WEEKDAYS = {name: i for i, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
_FIELDS = (_Bounds(0, 59, {}), _Bounds(0, 23, {}), _Bounds(1, 31, {}), _Bounds(1, 12, _MONTHS),
           _Bounds(0, 6, _WEEKDAYS))
_DESCRIPTORS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
                "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}
# robfig gives up after five years without a match (Feb 30th never comes).
_SEARCH_YEARS = 5


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule: the allowed values of each field, or a fixed interval for `@every`."""

    minutes: frozenset[int] = frozenset()
    hours: frozenset[int] = frozenset()
    days: frozenset[int] = frozenset()
    months: frozenset[int] = frozenset()
    weekdays: frozenset[int] = frozenset()
    # Whether day-of-month / day-of-week was a star (`*`, `?`, or a star with step 1).
    any_day: bool = False
    any_weekday: bool = False
    every: float | None = None  # seconds, for `@every`


def _go_atoi(text: str) -> int:
    """strconv.Atoi: an optional sign and ASCII digits, nothing else."""
    body = text[1:] if text[:1] in "+-" else text
    if not validation.is_ascii_digits(body):
        raise CronError(f'failed to parse int from {text}: strconv.Atoi: parsing "{text}": invalid syntax')
    return int(text)


def _number(text: str) -> int:
    value = _go_atoi(text)
    if value < 0:
        raise CronError(f"negative number ({value}) not allowed: {text}")
    return value


def _int_or_name(text: str, bounds: _Bounds) -> int:
    named = bounds.names.get(text.lower())
    return named if named is not None else _number(text)


def _parse_range(expr: str, bounds: _Bounds) -> tuple[set[int], bool]:
    """One comma-separated part: the values it allows, and whether it counts as a star."""
    range_and_step = expr.split("/")
    low_high = range_and_step[0].split("-")
    star = False
    if low_high[0] in ("*", "?"):
        start, end, star = bounds.low, bounds.high, True
    else:
        start = _int_or_name(low_high[0], bounds)
        if len(low_high) == 1:
            end = start
        elif len(low_high) == 2:
            end = _int_or_name(low_high[1], bounds)
        else:
            raise CronError(f"too many hyphens: {expr}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _number(range_and_step[1])
        if len(low_high) == 1:
            end = bounds.high  # "N/step" means "N-max/step"
        if step > 1:
            star = False
    else:
        raise CronError(f"too many slashes: {expr}")
    if start < bounds.low:
        raise CronError(f"beginning of range ({start}) below minimum ({bounds.low}): {expr}")
    if end > bounds.high:
        raise CronError(f"end of range ({end}) above maximum ({bounds.high}): {expr}")
    if start > end:
        raise CronError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise CronError(f"step of range should be a positive number: {expr}")
    return set(range(start, end + 1, step)), star


def _parse_field(text: str, bounds: _Bounds) -> tuple[frozenset[int], bool]:
    values: set[int] = set()
    star = False
    for part in text.split(","):
        allowed, part_star = _parse_range(part, bounds)
        values |= allowed
        star = star or part_star
    return frozenset(values), star


def parse(spec: str) -> Schedule:
    """cron.ParseStandard. Raises CronError with robfig's message."""
    if not spec:
        raise CronError("empty spec string")
    if spec.startswith(("TZ=", "CRON_TZ=")):
        space = spec.find(" ")
        name = spec[spec.index("=") + 1: space if space >= 0 else len(spec)]
        try:
            zoneinfo.ZoneInfo(name)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
            raise CronError(f"provided bad location {name}: unknown time zone {name}") from exc
        spec = spec[space:].strip() if space >= 0 else ""
    if spec.startswith("@"):
        return _parse_descriptor(spec)
    fields = spec.split()
    if len(fields) != 5:
        raise CronError(f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]")
    (minutes, _), (hours, _), (days, any_day), (months, _), (weekdays, any_weekday) = (
        _parse_field(text, bounds) for text, bounds in zip(fields, _FIELDS, strict=True))
    return Schedule(minutes, hours, days, months, weekdays, any_day, any_weekday)


def _parse_descriptor(spec: str) -> Schedule:
    if spec in _DESCRIPTORS:
        return parse(_DESCRIPTORS[spec])
    if spec.startswith("@every "):
        text = spec[len("@every "):]
        try:
            seconds = timeutil.parse_duration(text)
        except ValueError as exc:
            raise CronError(f"failed to parse duration {spec}: {exc}") from exc
        if not text.strip() or validation.is_ascii_digits(text.strip().lstrip("+-").replace(".", "")):
            # Go's ParseDuration wants a unit ("1h"); kubelab's helper takes bare seconds.
            raise CronError(f'failed to parse duration {spec}: time: missing unit in duration "{text}"')
        # ConstantDelaySchedule: at least a second, in whole seconds.
        return Schedule(every=max(1.0, float(math.floor(seconds))))
    raise CronError(f"unrecognized descriptor: {spec}")


def load_zone(name: str | None) -> zoneinfo.ZoneInfo | None:
    """The zone of `spec.timeZone` (None: the controller's own zone, which is UTC here)."""
    return zoneinfo.ZoneInfo(name) if name else None


def _day_matches(schedule: Schedule, day: date) -> bool:
    dom = day.day in schedule.days
    dow = (day.isoweekday() % 7) in schedule.weekdays
    if schedule.any_day or schedule.any_weekday:
        return dom and dow
    return dom or dow


def next_time(schedule: Schedule, after: datetime, zone: zoneinfo.ZoneInfo | None = None) -> datetime | None:
    """The first time strictly after `after` at which the schedule fires (aware, UTC), or None when none
    comes within five years (robfig's zero time). Fields are matched on the wall clock of `zone`: a wall
    time a DST jump skips is taken at the offset before the jump, one it repeats fires once (the first)."""
    after = after.astimezone(UTC)
    if schedule.every is not None:
        # ConstantDelaySchedule.Next: t + delay, with t's sub-second part dropped.
        return after.replace(microsecond=0) + timedelta(seconds=schedule.every)
    tz = zone or UTC
    local = after.astimezone(tz)
    start = (local.replace(second=0, microsecond=0) + timedelta(minutes=1)).replace(tzinfo=None)
    day = start.date()
    last = day.replace(year=day.year + _SEARCH_YEARS) if not (day.month == 2 and day.day == 29) \
        else day.replace(year=day.year + _SEARCH_YEARS, day=28)
    hours = sorted(schedule.hours)
    minutes = sorted(schedule.minutes)
    while day <= last:
        if day.month not in schedule.months:
            # Jump to the first of the next month.
            day = (day.replace(day=1) + timedelta(days=32)).replace(day=1)
            continue
        if _day_matches(schedule, day):
            for hour in hours:
                for minute in minutes:
                    wall = datetime(day.year, day.month, day.day, hour, minute)
                    if wall < start:
                        continue
                    when = wall.replace(tzinfo=tz).astimezone(UTC)
                    if when > after:
                        return when
        day += timedelta(days=1)
    return None
