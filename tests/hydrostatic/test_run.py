"""run_model.py with `model: hydrostatic`, for real in a subprocess: a tiny JW06 run writes a
history that xarray reads (MPAS names, units, dimensions, the mesh); a bad config stops with one
line naming the key, the value and what is expected; the plot module draws the maps; the shared
stepping loop's faults: a SIGTERM while stepping is one line and exit 143 with the records so far
kept and a restart that resumes bitwise, the watchdog names the field, level and place of a state
that blows up for real (its last good state in the history and the restart), and of a first
state out of its limits. Restarts, resuming and rank counts: test_restart.py."""
import re
import signal
import subprocess
import sys

import netCDF4
import numpy as np
import pytest
import xarray as xr
import yaml

from tests.swm.test_faults import (RANKS, Background, Records, assert_same, env, error_of, ok,
                                   run_model, snapshot)
from tests.swm.test_faults import history as swm_history
from tests.swm.test_signals import listing, stopped, user_files

VARIABLES = ["theta", "temperature", "pressure", "surface_pressure", "temperature_850hPa", "u",
             "uReconstructZonal", "uReconstructMeridional", "zgrid"]


def config(tmp_path, name, **sections):
    """`name`.yaml in tmp_path: a level-2 JW06 wave, 3 steps of 1800 s, records every 1.5 h to
    `name`.nc, restarts to `name`.restart.nc; each section given merged into it."""
    tree = {"model": "hydrostatic", "mesh": {"generate": {"level": 2, "lloyd": 20}},
            "case": {"name": "jw06_baroclinic"}, "time": {"days": 0.125, "dt": 1800},
            "diffusion": {"visc4": 1.0e17},
            "output": {"path": str(tmp_path / f"{name}.nc"), "interval_hours": 1.5,
                       "variables": VARIABLES},
            "restart": {"path": str(tmp_path / f"{name}.restart.nc")}}
    for key, value in sections.items():
        tree[key] = {**tree.get(key, {}), **value} if isinstance(value, dict) else value
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(tree))
    return path


def history(path) -> Records:
    """{name: array} of every variable of a history or restart file (`timed`: along Time)."""
    return swm_history(path, timed=())


def test_history_is_read_by_xarray_with_mpas_names(tmp_path):
    out = ok(run_model(config(tmp_path, "one")))
    assert "backend numpy float64, operator path;" in out.stderr
    with xr.open_dataset(tmp_path / "one.nc") as ds:
        assert ds.sizes["nVertLevels"] == 26 and ds.sizes["nVertLevelsP1"] == 27
        assert ds.sizes["Time"] == 3 and ds.sizes["nCells"] == 162
        assert ds["theta"].dims == ("Time", "nCells", "nVertLevels") and ds["theta"].units == "K"
        assert ds["u"].dims == ("Time", "nEdges", "nVertLevels") and ds["u"].units == "m s-1"
        assert ds["zgrid"].dims == ("Time", "nCells", "nVertLevelsP1")
        assert ds["surface_pressure"].units == "Pa" and ds["temperature_850hPa"].units == "K"
        assert "areaCell" in ds and "cellsOnEdge" in ds and ds.attrs["core_name"] == "atmosphere"
        np.testing.assert_allclose(ds["surface_pressure"][0], 1.0e5, rtol=1e-13)
        assert float(ds["surface_pressure"][-1].std()) > 0               # the wave moves it
        assert np.all(np.diff(ds["pressure"][-1].values, axis=1) < 0)     # from the surface up
        t850 = ds["temperature_850hPa"][0].values
        assert 220 < t850.min() and t850.max() < 305      # JW06 fig.: 230-300 K
        np.testing.assert_allclose(ds["mass"], ds["mass"][0], rtol=1e-14)
        zonal = ds["uReconstructZonal"][0].values
        assert zonal.max() == pytest.approx(35.0, abs=5.0)               # the JW06 jet
    assert not (tmp_path / "one.nc.partial").exists()
    out = subprocess.run([sys.executable, "-m", "hydrostatic.plot", str(tmp_path / "one.nc"),
                          "--day", "0.125"], env=env(tmp_path / "cache"), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    for name in ("surface_pressure", "temperature_850hPa"):
        assert (tmp_path / f"one.{name}.day0.125.png").stat().st_size > 1000


@pytest.mark.parametrize("sections, expected", [
    ({"vertical": {"nVertLevels": 30}},
     "vertical.nVertLevels = 30: levels jw06_26 has 26 layers; expected nVertLevels: 26"),
    ({"case": {"name": "williamson5"}}, "case.name = 'williamson5': Input should be"),
    ({"time": {"dt": 700}}, "time.dt = 700.0: expected a divisor of output.interval_hours = 1.5 h"),
    ({"model": "nonhydrostatic"},
     "model = 'nonhydrostatic': unknown model; expected one of: shallow_water, hydrostatic"),
])
def test_bad_config_is_one_line_naming_the_key(tmp_path, sections, expected):
    path = config(tmp_path, "bad", **sections)
    out = run_model(path)
    assert out.returncode == 2
    assert expected in error_of(out.stderr)
    assert not (tmp_path / "bad.nc").exists()


def test_output_that_is_not_the_models_is_left_intact(tmp_path):
    target = tmp_path / "mine.nc"
    target.write_bytes(b"a user's file")
    out = run_model(config(tmp_path, "mine"))
    assert out.returncode == 2
    assert "output.path" in error_of(out.stderr) and "did not write" in error_of(out.stderr)
    assert target.read_bytes() == b"a user's file"


# -- the shared stepping loop (framework.simulation.Simulation) ------------------------------------------

@pytest.mark.parametrize("ranks", RANKS)
def test_sigterm_while_stepping_is_one_line_and_keeps_the_records(tmp_path, ranks):
    """SIGTERM after two records: one line naming the step and the resume, exit 143, the partial
    history holding the records so far and the stopped step (checked finite), the restart of that
    step, no lock, the user's file intact; the resumed run's history and final state are bitwise
    those of an uninterrupted run."""
    rng = np.random.default_rng()
    diffusion = {"visc4": float(rng.uniform(0.5e17, 2.0e17))}
    path = config(tmp_path, "term", time={"days": 40, "dt": 1800}, diffusion=diffusion)
    mine, before = user_files(tmp_path)
    run = Background(path, ranks=ranks)
    run.wait_for(lambda: "day 0.125:" in run.text(), "two records after the first")
    run.proc.send_signal(signal.SIGTERM)
    line = stopped(run, signal.SIGTERM, "at step", "resume with --set restart.resume=true")
    step = int(re.search(r"at step (\d+)", line)[1])
    assert 6 <= step < 40 * 48
    assert snapshot(mine) == before
    with netCDF4.Dataset(tmp_path / "term.nc.partial") as ds:
        assert round(float(ds["Time"][-1]) * 48) == step
        assert len(ds["Time"]) == -(-step // 3) + 1        # a record every 3 steps, then the stop's
        assert np.isfinite(ds["theta"][:]).all() and np.isfinite(ds["mass"][:]).all()
    with netCDF4.Dataset(tmp_path / "term.restart.nc") as ds:
        assert int(ds.step) == step and np.isfinite(ds["theta_mass"][:]).all()
    assert listing(tmp_path) == sorted(["cache", *(f"cache/{p.name}" for p in
                                                   (tmp_path / "cache").iterdir()),
                                        "notes.bin", "term.nc.partial", "term.restart.nc",
                                        "term.yaml"])

    days = f"time.days={(step // 3 + 2) * 3 / 48!r}"        # two records past the stop
    whole = config(tmp_path, "whole", time={"dt": 1800}, diffusion=diffusion,
                   restart={"interval_hours": 1.5})
    ok(run_model(whole, "--set", days, ranks=ranks))
    ok(run_model(path, "--set", "restart.resume=true", "--set", days,
                 "--set", "restart.interval_hours=1.5", ranks=ranks))
    assert_same(history(tmp_path / "whole.nc"), history(tmp_path / "term.nc"))
    assert_same(history(tmp_path / "whole.restart.nc"), history(tmp_path / "term.restart.nc"))
    assert snapshot(mine) == before and not (tmp_path / "term.nc.partial").exists()


@pytest.mark.parametrize("ranks", RANKS)
def test_watchdog_names_the_field_level_and_place_of_a_blow_up(tmp_path, ranks):
    """A 6 h step on a level-2 mesh: the second step makes a layer's mass negative; the watchdog
    (before the record due at that step) names step, field, level, cell and lat/lon, exit 3, and the
    history under its final name ends with the last good state, which the restart holds."""
    path = config(tmp_path, "blow", time={"days": 3, "dt": 21600},
                  output={"interval_hours": 6, "variables": ["theta", "u"]})
    out = run_model(path, ranks=ranks)
    assert out.returncode == 3, out.stderr
    line = error_of(out.stderr)
    assert re.search(r"stopped: step 2: mass = -[0-9.e+]+ at level \d+ of 26 \(1: lowest\), cell "
                     r"\d+ \(1-based as in MPAS; lat -?[0-9.]+, lon [0-9.]+ deg\): not positive \(a layer without mass\); "
                     r"the last checked state \(step 1, day 0.2500\) is kept", line), line
    with netCDF4.Dataset(tmp_path / "blow.nc") as ds:
        assert len(ds["Time"]) == 2 and float(ds["Time"][-1]) == 0.25
        assert np.isfinite(ds["theta"][:]).all() and (ds["mass"][:] > 0).all()
    with netCDF4.Dataset(tmp_path / "blow.restart.nc") as ds:       # the last good state
        assert int(ds.step) == 1 and (ds["mass"][:] > 0).all()
    assert not (tmp_path / "blow.nc.partial").exists() and not (tmp_path / "blow.nc.lock").exists()


def test_a_first_state_out_of_the_watchdog_limits_stops_before_stepping(tmp_path):
    """watchdog.max_wind below the JW06 jet: the first state is refused, naming u, its level and
    edge; no history is left."""
    limit = float(np.random.default_rng().uniform(5.0, 20.0))
    path = config(tmp_path, "jet", watchdog={"max_wind": limit})
    out = run_model(path)
    assert out.returncode == 3, out.stderr
    line = error_of(out.stderr)
    assert re.search(r"stopped: step 0: u = -?[0-9.e+]+ at level \d+ of 26 \(1: lowest\), edge \d+ "
                     rf"\(1-based as in MPAS; lat .*\): \|u\| above watchdog.max_wind = {limit:g} m/s: the initial state "
                     "is out of range", line), line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "jet.yaml"]
