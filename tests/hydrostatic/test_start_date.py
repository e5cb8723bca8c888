"""time.start of the hydrostatic core (MPAS's config_start_time), for real: a run from a fresh random
date writes xtime and the CF Time units from it (xarray decodes the dates), its restart's time
too; a resumed run continues the dates; a resume with another start date, and a bad date, are
refused in one line naming time.start, the value and the expected form."""
import datetime

import netCDF4
import numpy as np
import pytest
import xarray as xr

from framework.dates import parse_start
from tests.hydrostatic.test_run import config
from tests.swm.test_faults import error_of, ok, refused, run_model


def random_start(rng) -> datetime.datetime:
    """A date away from 29 February (the noleap calendar has none): the same day in both
    calendars for the hours of the run."""
    return datetime.datetime(int(rng.integers(1, 9999)), int(rng.choice([1, 3, 5, 7, 10, 12])),
                             int(rng.integers(1, 29)), int(rng.integers(0, 24)),
                             int(rng.integers(0, 60)), int(rng.integers(0, 60)))


def xtimes(path) -> list[str]:
    with netCDF4.Dataset(path) as ds:
        return [b"".join(row).decode().strip() for row in ds["xtime"][:]]


def mpas(date: datetime.datetime) -> str:
    return date.strftime("%Y-%m-%d_%H:%M:%S").rjust(19, "0")


def test_the_history_and_restart_follow_the_start_date_and_a_resume_continues_it(tmp_path):
    start = random_start(np.random.default_rng())
    given = start.strftime("%Y-%m-%d %H:%M:%S").rjust(19, "0")       # the space form
    path = config(tmp_path, "date", time={"start": given, "days": 2 / 48},
                  restart={"interval_hours": 0.5})
    ok(run_model(path))
    hour = datetime.timedelta(hours=1)
    assert xtimes(tmp_path / "date.nc") == [mpas(start), mpas(start + hour)]
    with netCDF4.Dataset(tmp_path / "date.nc") as ds:
        assert ds["Time"].units == f"days since {mpas(start).replace('_', ' ')}"
        assert ds["Time"].calendar == "noleap" and ds.config_start_time == mpas(start)
    with netCDF4.Dataset(tmp_path / "date.restart.nc") as ds:
        assert ds.xtime == mpas(start + hour) and ds["Time"].units.endswith(given)
    with xr.open_dataset(tmp_path / "date.nc",
                         decode_times=xr.coders.CFDatetimeCoder(use_cftime=True)) as ds:     # CF decoding
        decoded = ds["Time"].values
        assert decoded[1].strftime("%Y-%m-%d_%H:%M:%S").rjust(19, "0") == mpas(start + hour)

    out = ok(run_model(path, "--set", "restart.resume=true", "--set", "time.days=0.125"))
    assert "at step 2" in out.stderr
    assert xtimes(tmp_path / "date.nc") == [mpas(start + k * 1.5 * hour) for k in range(3)]
    with netCDF4.Dataset(tmp_path / "date.restart.nc") as ds:
        assert ds.xtime == mpas(start + 3 * hour)

    other = mpas(start + 24 * hour)
    out = run_model(path, "--set", "restart.resume=true", "--set", "time.days=0.25",
                    "--set", f"time.start={other}")
    refused(out, 2, "restart.path", f"time.start = {mpas(start)}", f"the config gives {other}",
            "settings of the run being resumed")


def test_the_default_start_is_mpas_year_zero(tmp_path):
    ok(run_model(config(tmp_path, "zero", time={"days": 1 / 48})))
    assert xtimes(tmp_path / "zero.nc") == ["0000-01-01_00:00:00", "0000-01-01_00:30:00"]
    with netCDF4.Dataset(tmp_path / "zero.nc") as ds:
        assert ds["Time"].units == "days since 0000-01-01 00:00:00"


@pytest.mark.parametrize("bad", ["2001-02-29_00:00:00", "2000-13-01 00:00:00", "01/02/2000",
                                 "2000-01-01 24:00:00", "tomorrow", "2000-1-1"])
def test_a_bad_start_date_is_refused_naming_the_key_value_and_form(tmp_path, bad):
    out = run_model(config(tmp_path, "bad", time={"start": bad}))
    assert out.returncode != 0
    line = error_of(out.stderr)
    assert f"time.start = {bad!r}" in out.stderr and "YYYY-MM-DD_hh:mm:ss" in out.stderr, line
    assert not (tmp_path / "bad.nc").exists()


@pytest.mark.parametrize("given, expected", [
    ("2000-01-01", "2000-01-01_00:00:00"), ("0000-01-01_00:00:00", "0000-01-01_00:00:00"),
    ("1999-12-31T23:59:59", "1999-12-31_23:59:59"),
    (datetime.datetime(2000, 3, 1, 6), "2000-03-01_06:00:00"),
    (datetime.date(2020, 7, 4), "2020-07-04_00:00:00")])
def test_start_dates_are_read_in_mpas_form(given, expected):
    assert parse_start(given) == expected
