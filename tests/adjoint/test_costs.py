"""Cost functions of the sensitivity runs: gradients against finite differences on a real model
state, the box selection, and clear errors for an empty box and bad observation files."""
import netCDF4
import numpy as np
import pytest
import yaml

from adjoint.costs import CostError, in_box
from swm.costs import ObservationCost, RegionCost, write_observations
from adjoint.sensitivity import cost_context
from meshrun.config import load_config
from swm.driver import setup


@pytest.fixture(scope="module")
def run_setup(tmp_path_factory):
    path = tmp_path_factory.mktemp("costs") / "w5.yaml"
    path.write_text(yaml.safe_dump({"mesh": {"generate": {"level": 3, "lloyd": 10}},
                                    "case": {"name": "williamson5"},
                                    "time": {"days": 0.25, "dt": 1800},
                                    "output": {"interval_hours": 6}}))
    return setup(load_config(path))


def state(s, rng):
    return [s.model.h * (1 + 0.01 * rng.standard_normal(s.model.h.shape)),
            s.model.u + rng.standard_normal(s.model.u.shape)]


@pytest.mark.parametrize("field,statistic", [("h", "mean"), ("h", "energy"),
                                             ("vorticity", "mean"), ("vorticity", "energy")])
def test_region_cost_gradient_matches_central_differences(run_setup, field, statistic):
    rng = np.random.default_rng()
    s = run_setup
    cost = RegionCost(cost_context(s), field, statistic, ((10.0, 60.0), (250.0, 330.0)),
                      window_hours=(0, 6))
    x = state(s, rng)
    k = max(cost.steps)
    g = cost.gradient(k, x)
    d = [rng.standard_normal(a.shape) for a in x]
    derivative = sum(float((a * b).sum()) for a, b in zip(g, d))
    eps = 1.0                     # J is at most quadratic in the state: central differences are exact
    plus = cost.value(k, [a + eps * b for a, b in zip(x, d)])
    minus = cost.value(k, [a - eps * b for a, b in zip(x, d)])
    assert (plus - minus) / (2 * eps) == pytest.approx(derivative, rel=1e-7, abs=1e-14)
    assert cost.value(0, x) != 0.0 and sorted(cost.steps) == list(range(13))   # 6 h of 1800 s steps


def test_mean_of_h_over_the_globe_is_the_area_mean(run_setup):
    s = run_setup
    cost = RegionCost(cost_context(s), "h", "mean", ((-90.0, 90.0), (0.0, 360.0)))
    h = s.model.h
    area = s.mesh.areaCell
    assert cost.value(s.total, [h, s.model.u]) == pytest.approx(float((area * h).sum() / area.sum()),
                                                                 rel=1e-14)


def test_box_longitudes_wrap_through_zero():
    lat = np.radians([0.0, 0.0, 0.0, 0.0, 45.0])
    lon = np.radians([350.0, 5.0, 20.0, 180.0, 0.0])
    assert in_box(lat, lon, ((-10, 10), (-20, 10))).tolist() == [True, True, False, False, False]
    assert in_box(lat, lon, ((-10, 10), (340, 10))).tolist() == [True, True, False, False, False]
    assert in_box(lat, lon, ((-90, 90), (0, 360))).all()


def test_an_empty_box_is_an_error_naming_the_key(run_setup):
    with pytest.raises(CostError, match=r"sensitivity.cost.box = lat \[10.0, 10.001\].*contains no cell"):
        RegionCost(cost_context(run_setup), "h", "mean", ((10.0, 10.001), (0.0, 0.001)))


def test_a_window_with_no_step_is_an_error(run_setup):
    with pytest.raises(CostError, match=r"window_hours = \[100, 200\] h: no time step"):
        RegionCost(cost_context(run_setup), "h", "mean", ((-90, 90), (0, 360)), window_hours=(100, 200))


def observations(tmp_path, s, rng, n=20):
    cells = rng.choice(s.mesh.nCells, n, replace=False)
    steps = rng.integers(0, s.total + 1, n)
    path = tmp_path / "obs.nc"
    write_observations(path, cells, steps * s.dt, 5000 + rng.standard_normal(n), np.full(n, 2.0))
    return path, cells, steps


def test_misfit_gradient_and_value(run_setup, tmp_path):
    rng = np.random.default_rng()
    s = run_setup
    path, cells, steps = observations(tmp_path, s, rng)
    cost = ObservationCost(cost_context(s), path)
    x = state(s, rng)
    with netCDF4.Dataset(path) as ds:
        y, sigma = ds["h"][:], ds["error"][:]
    k = int(steps[0])
    rows = steps == k
    expected = 0.5 * np.sum(((x[0][cells[rows]] - y[rows]) / sigma[rows]) ** 2)
    assert cost.value(k, x) == pytest.approx(expected, rel=1e-13)
    g = cost.gradient(k, x)
    d = rng.standard_normal(x[0].shape)
    eps = 1.0   # the misfit is quadratic: a centred difference is exact for any step, and a unit
    # step keeps the cancellation of two values of J far below the tolerance (1e-3 reached 1.4e-8)
    fd = (cost.value(k, [x[0] + eps * d, x[1]]) - cost.value(k, [x[0] - eps * d, x[1]])) / (2 * eps)
    # bounded by the scale of <g, d>'s terms: a random d can make their sum cancel to near 0
    assert abs(fd - float((g[0] * d).sum())) <= 1e-8 * float(np.abs(g[0] * d).sum())
    assert not g[1].any()


@pytest.mark.parametrize("change,message", [
    ({"cell": 10**6}, r"cell\[0\] = 1e\+06: expected a 1-based cell index in \[1, 642\]"),
    ({"cell": 0}, r"cell\[0\] = 0: expected a 1-based cell index"),
    ({"time": 1000.0}, r"time\[0\] = 1000 s: expected a time of the run, a multiple of dt = 1800 s"),
    ({"time": 1e7}, r"time\[0\] = 1e\+07 s: expected a time of the run"),
    ({"error": -1.0}, r"error\[0\] = -1 m \(cell \d+, time \d+ s\): expected a positive "
                      r"observation error \(m\); mark a missing observation with"),
    ({"h": np.nan}, r"h\[0\] = nan m \(cell \d+, time \d+ s\): expected a finite thickness > 0 m"),
    ({"time": np.inf}, r"time\[0\] = inf s: expected a finite time \(s\)"),
    ({"h": -9999.0}, r"h\[0\] = -9999 m \(cell \d+, time \d+ s\): expected a fluid thickness > 0 m; "
                     r"mark a missing observation with the variable's _FillValue or missing_value"),
    ({"h": 0.0}, r"h\[0\] = 0 m \(cell \d+, time \d+ s\): expected a fluid thickness > 0 m"),
])
def test_bad_observation_files_name_the_file_variable_and_value(run_setup, tmp_path, change, message):
    rng = np.random.default_rng()
    path, _, _ = observations(tmp_path, run_setup, rng)
    with netCDF4.Dataset(path, "a") as ds:
        for name, value in change.items():
            ds[name][0] = value
    with pytest.raises(CostError, match=message) as err:
        ObservationCost(cost_context(run_setup), path)
    assert str(path) in str(err.value)


def test_an_observation_file_without_a_variable(run_setup, tmp_path):
    path = tmp_path / "obs.nc"
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("nObs", 3)
        for name in ("cell", "time", "h"):
            ds.createVariable(name, "f8", ("nObs",))[:] = 1.0
    with pytest.raises(CostError, match=r"obs.nc: variable 'error' missing"):
        ObservationCost(cost_context(run_setup), path)


@pytest.mark.parametrize("attribute", ["_FillValue", "missing_value"])
def test_observations_marked_missing_are_left_out_of_the_cost(run_setup, tmp_path, attribute, caplog):
    """h = -9999 where the file marks -9999 missing (at random rows): those observations are left
    out, J and its gradient equal those of a file holding only the others, and the log says how
    many."""
    rng = np.random.default_rng()
    s = run_setup
    n = 30
    cells = rng.choice(s.mesh.nCells, n, replace=False)
    steps = rng.integers(0, s.total + 1, n)
    h = 5000 + rng.standard_normal(n)
    gone = rng.choice(n, 4, replace=False)
    marked = tmp_path / "marked.nc"
    with netCDF4.Dataset(marked, "w") as ds:
        ds.createDimension("nObs", n)
        for name, values in (("cell", cells + 1), ("time", steps * s.dt), ("h", h),
                             ("error", np.full(n, 2.0))):
            fill = {"fill_value": -9999.0} if name == "h" and attribute == "_FillValue" else {}
            var = ds.createVariable(name, "f8", ("nObs",), **fill)
            if name == "h" and attribute == "missing_value":
                var.missing_value = -9999.0
            var[:] = values
        ds["h"][gone] = -9999.0
    kept = np.setdiff1d(np.arange(n), gone)
    plain = tmp_path / "plain.nc"
    write_observations(plain, cells[kept], steps[kept] * s.dt, h[kept], np.full(kept.size, 2.0))
    with caplog.at_level("INFO", logger="adjoint"):
        cost = ObservationCost(cost_context(s), marked)
    assert f"{marked}: 4 of {n} observations left out of the cost as missing values " \
           f"(h: 4 ({attribute} = -9999.0))" in caplog.text
    reference = ObservationCost(cost_context(s), plain)
    x = state(s, rng)
    for k in range(s.total + 1):
        assert cost.value(k, x) == reference.value(k, x)
        g, g_ref = cost.gradient(k, x), reference.gradient(k, x)
        assert (g is None) == (g_ref is None)
        if g is not None:
            assert np.array_equal(g[0], g_ref[0])


def test_a_file_of_missing_observations_only_is_refused(run_setup, tmp_path):
    path = tmp_path / "obs.nc"
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("nObs", 3)
        for name in ("cell", "time", "error"):
            ds.createVariable(name, "f8", ("nObs",))[:] = 1.0
        ds.createVariable("h", "f8", ("nObs",), fill_value=-1.0)[:] = -1.0
    with pytest.raises(CostError, match=r"obs.nc: all 3 observations are missing values \(h: 3 "
                                        r"\(_FillValue = -1.0\)\); expected at least one"):
        ObservationCost(cost_context(run_setup), path)
