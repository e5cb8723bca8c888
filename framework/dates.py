"""The model calendar: a run's start date (MPAS's `config_start_time`, "YYYY-MM-DD_hh:mm:ss"), the
CF time units of its files ("days since <start>"), and MPAS's `xtime` stamp of a model time.

Every run counts its time in seconds from its start date on the noleap calendar (MPAS's
`gregorian_noleap`: 365-day years, no leap days); the default start is MPAS's
0000-01-01_00:00:00. `parse_start` accepts the MPAS form, the same with a space or a "T" for the
"_", a date alone (midnight), or the datetime/date YAML makes of an unquoted "2000-01-01 00:00:00".
"""
from __future__ import annotations

import datetime
import re

#: The calendar of every file's `Time` (CF name) and MPAS's name of it.
CALENDAR, MPAS_CALENDAR = "noleap", "gregorian_noleap"
#: The default start date (MPAS's form).
START = "0000-01-01_00:00:00"
#: What a start date must look like (the message of a bad one).
EXPECTED = ("expected a date and time as YYYY-MM-DD_hh:mm:ss (MPAS's form; a space or T for the _, "
            "or a date alone, are accepted), e.g. '2000-01-01_00:00:00', a valid day of the "
            "noleap calendar (no 29 February)")
_FORM = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[_ T](\d{2}):(\d{2}):(\d{2}))?")


def parse_start(value) -> str:
    """The start date `value` (str, or a datetime/date as YAML reads an unquoted one) in MPAS's
    form "YYYY-MM-DD_hh:mm:ss"; ValueError (saying what is expected) for anything else."""
    import cftime

    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        value = value.strftime("%Y-%m-%d_%H:%M:%S")
    elif isinstance(value, datetime.date):
        value = value.strftime("%Y-%m-%d")
    match = _FORM.fullmatch(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise ValueError(EXPECTED)
    year, month, day, hour, minute, second = (int(g or 0) for g in match.groups())
    try:
        if hour > 23 or minute > 59 or second > 59:
            raise ValueError("time of day")
        cftime.datetime(year, month, day, hour, minute, second, calendar=CALENDAR)
    except ValueError:
        raise ValueError(EXPECTED) from None
    return f"{year:04d}-{month:02d}-{day:02d}_{hour:02d}:{minute:02d}:{second:02d}"


def time_units(start: str = START) -> str:
    """CF units of a `Time` in days from `start` (MPAS form): "days since 2000-01-01 00:00:00"."""
    return "days since " + start.replace("_", " ")


def xtime(seconds: float, start: str = START) -> str:
    """MPAS time stamp "YYYY-MM-DD_hh:mm:ss" of `seconds` (rounded to whole seconds) after
    `start` on the noleap calendar."""
    import cftime

    stamp = cftime.num2date(round(seconds) / 86400.0, time_units(start), calendar=CALENDAR)
    return stamp.strftime("%Y-%m-%d_%H:%M:%S").rjust(19, "0")


def start_of(config) -> str:
    """The start date of `config` (its time.start; START for a model without one)."""
    return getattr(config.time, "start", START)
