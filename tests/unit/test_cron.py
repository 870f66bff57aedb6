"""kubelab.cron against robfig/cron v3's ParseStandard: what it accepts, its error messages, and next times
(named cases, worked out by hand from cron's rules)."""

from __future__ import annotations

import zoneinfo
from datetime import UTC, datetime

import pytest

from kubelab import cron


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize(("spec", "message"), [
    pytest.param("", "empty spec string", id="empty"),
    pytest.param("foo", "expected exactly 5 fields, found 1: [foo]", id="one field"),
    pytest.param("* * * * * *", "expected exactly 5 fields, found 6: [* * * * * *]", id="six fields (no seconds)"),
    pytest.param("60 * * * *", "end of range (60) above maximum (59): 60", id="minute 60"),
    pytest.param("* * 0 * *", "beginning of range (0) below minimum (1): 0", id="day 0"),
    pytest.param("* * * * 7", "end of range (7) above maximum (6): 7", id="weekday 7"),
    pytest.param("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1", id="backwards range"),
    pytest.param("*/0 * * * *", "step of range should be a positive number: */0", id="step 0"),
    pytest.param("1-2-3 * * * *", "too many hyphens: 1-2-3", id="hyphens"),
    pytest.param("*/2/3 * * * *", "too many slashes: */2/3", id="slashes"),
    pytest.param("x * * * *", 'failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax', id="not a number"),
    pytest.param("* * * foo *", 'failed to parse int from foo: strconv.Atoi: parsing "foo": invalid syntax',
                 id="unknown month name"),
    pytest.param("@fortnightly", "unrecognized descriptor: @fortnightly", id="unknown descriptor"),
    pytest.param("@every", "unrecognized descriptor: @every", id="every without duration"),
    pytest.param("@every 5", 'failed to parse duration @every 5: time: missing unit in duration "5"', id="every no unit"),
])
def test_refused(spec: str, message: str) -> None:
    with pytest.raises(cron.CronError) as exc:
        cron.parse(spec)
    assert str(exc.value) == message


@pytest.mark.parametrize(("spec", "after", "expected"), [
    pytest.param("* * * * *", "2026-01-01T10:00:30", "2026-01-01T10:01:00", id="every minute"),
    pytest.param("*/15 * * * *", "2026-01-01T10:01:00", "2026-01-01T10:15:00", id="step"),
    pytest.param("5/20 * * * *", "2026-01-01T10:26:00", "2026-01-01T10:45:00", id="N/step means N-max/step"),
    pytest.param("0 9-17/4 * * *", "2026-01-01T13:00:00", "2026-01-01T17:00:00", id="range with step"),
    pytest.param("@hourly", "2026-01-01T10:00:00", "2026-01-01T11:00:00", id="@hourly strictly after"),
    pytest.param("@daily", "2026-01-01T10:00:00", "2026-01-02T00:00:00", id="@daily"),
    pytest.param("@midnight", "2026-01-01T10:00:00", "2026-01-02T00:00:00", id="@midnight"),
    pytest.param("@weekly", "2026-01-01T10:00:00", "2026-01-04T00:00:00", id="@weekly is Sunday"),
    pytest.param("@monthly", "2026-01-15T00:00:00", "2026-02-01T00:00:00", id="@monthly"),
    pytest.param("@yearly", "2026-03-01T00:00:00", "2027-01-01T00:00:00", id="@yearly"),
    pytest.param("@annually", "2026-03-01T00:00:00", "2027-01-01T00:00:00", id="@annually"),
    pytest.param("0 0 * * MON", "2026-01-01T00:00:00", "2026-01-05T00:00:00", id="weekday by name, any case"),
    pytest.param("0 0 1 jan,Jul *", "2026-02-01T00:00:00", "2026-07-01T00:00:00", id="months by name"),
    pytest.param("0 0 13 * 5", "2026-01-01T00:00:00", "2026-01-02T00:00:00", id="dom or dow: Friday the 2nd"),
    pytest.param("0 0 13 * *", "2026-01-01T00:00:00", "2026-01-13T00:00:00", id="dom alone"),
    pytest.param("0 0 ? * 0", "2026-01-01T00:00:00", "2026-01-04T00:00:00", id="? is a star"),
    pytest.param("0 0 29 2 *", "2026-03-01T00:00:00", "2028-02-29T00:00:00", id="leap day"),
    pytest.param("@every 90m", "2026-01-01T10:00:30.5", "2026-01-01T11:30:30", id="@every drops sub-seconds"),
])
def test_next_time(spec: str, after: str, expected: str) -> None:
    assert cron.next_time(cron.parse(spec), at(after)) == at(expected)


def test_feb_30_never_comes() -> None:
    assert cron.next_time(cron.parse("0 0 30 2 *"), at("2026-01-01T00:00:00")) is None


def test_time_zone_shifts_the_wall_clock() -> None:
    paris = zoneinfo.ZoneInfo("Europe/Paris")
    # 09:00 in Paris is 08:00 UTC in winter and 07:00 UTC in summer.
    assert cron.next_time(cron.parse("0 9 * * *"), at("2026-01-10T12:00:00"), paris) == at("2026-01-11T08:00:00")
    assert cron.next_time(cron.parse("0 9 * * *"), at("2026-07-10T12:00:00"), paris) == at("2026-07-11T07:00:00")
