"""run_model.py with `model: hydrostatic`, for real in a subprocess: a tiny JW06 run writes a
history that xarray reads (MPAS names, units, dimensions, the mesh); 2 ranks under mpiexec write
the same history bitwise; a bad config stops with one line naming the key, the value and what is
expected; the plot module draws the maps."""
import subprocess
import sys

import numpy as np
import pytest
import xarray as xr
import yaml

from tests.swm.test_faults import ROOT, env, error_of, ok, run_model

VARIABLES = ["theta", "temperature", "pressure", "surface_pressure", "temperature_850hPa", "u",
             "uReconstructZonal", "uReconstructMeridional", "zgrid"]


def config(tmp_path, name, **sections):
    tree = {"model": "hydrostatic", "mesh": {"generate": {"level": 2, "lloyd": 20}},
            "case": {"name": "jw06_baroclinic"}, "time": {"days": 0.125, "dt": 1800},
            "diffusion": {"visc4": 1.0e17},
            "output": {"path": str(tmp_path / f"{name}.nc"), "interval_hours": 1.5,
                       "variables": VARIABLES}}
    for key, value in sections.items():
        tree[key] = {**tree.get(key, {}), **value} if isinstance(value, dict) else value
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(tree))
    return path


def test_history_is_read_by_xarray_with_mpas_names(tmp_path):
    ok(run_model(config(tmp_path, "one")))
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


@pytest.mark.mpi
def test_two_ranks_write_the_one_process_history_bitwise(tmp_path):
    ok(run_model(config(tmp_path, "one")))
    ok(run_model(config(tmp_path, "two"), ranks=2))
    with xr.open_dataset(tmp_path / "one.nc") as a, xr.open_dataset(tmp_path / "two.nc") as b:
        for name in VARIABLES:
            assert np.array_equal(a[name].values, b[name].values), name


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
