"""The hydrostatic core's cost functions (hydrostatic.costs) on a real generated mesh and random
JW06-like states: every cost's gradient against central differences, box means against their
definitions, observation files refused in one line naming the variable and the value, and the
values and gathered gradients of 2 ranks (mpiexec, tests/mpi/test_hydrostatic_costs.py) equal to
one process's bitwise."""
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

from adjoint.costs import Context, CostError
from meshops.parallel.comm import SerialComm
from grids.cache import cached_icosahedral
from framework.constants import GRAVITY

from hydrostatic import levels, testcases
from hydrostatic.costs import (KineticEnergyCost, MinimumSurfacePressureCost, ObservationCost,
                               SurfacePressureCost, Temperature850Cost, surface_pressure,
                               temperature, write_observations)
from hydrostatic.dynamics import Physics

ROOT = pathlib.Path(__file__).resolve().parents[2]
A, B = levels.coefficients("jw06_26")
PHYSICS = Physics(p_top=float(A[-1]), dB=B[:-1] - B[1:])
DT, N_STEPS = 1800.0, 4
BOX = ((25.0, 70.0), (20.0, 120.0))


@pytest.fixture(scope="module")
def mesh():
    return cached_icosahedral(3, lloyd_iterations=50)


@pytest.fixture(scope="module")
def base(mesh):
    return testcases.initial_state(mesh, "jw06_baroclinic", A, B)


def context(mesh):
    owned = {"cell": mesh.nCells, "edge": mesh.nEdges, "vertex": mesh.nVertices}
    return Context(mesh, mesh, owned, np.arange(mesh.nCells), SerialComm(), DT, N_STEPS,
                   lambda *fields: None, np, np.float64)


def jw06_like(mesh, base, rng):
    """The baroclinic state with fresh random perturbations of p_s, theta and u."""
    ps = levels.P0 + 800.0 * rng.standard_normal(mesh.nCells)
    mass = levels.layer_mass(A, B, ps, GRAVITY)
    theta = base.theta_mass / base.mass * (1.0 + 2e-3 * rng.standard_normal(base.mass.shape))
    return [mass, mass * theta, base.u + 3.0 * rng.standard_normal(base.u.shape)]


def direction(x, rng):
    return [rng.standard_normal(a.shape) * scale for a, scale in
            zip(x, (1e-3 * x[0], 1e-3 * x[1], np.ones_like(x[2])))]


def assert_gradient(cost, k, x, rng, rel=1e-6):
    """dJ/dx . dx against central differences along a random direction (eps small enough for
    the bracket of 850 hPa not to move), halo rows of the gradient aside (none here)."""
    g = cost.gradient(k, x)
    d = direction(x, rng)
    derivative = sum(float((a * b).sum()) for a, b in zip(g, d))
    eps = 1e-4
    plus = cost.value(k, [a + eps * b for a, b in zip(x, d)])
    minus = cost.value(k, [a - eps * b for a, b in zip(x, d)])
    assert derivative != 0.0
    assert (plus - minus) / (2 * eps) == pytest.approx(derivative, rel=rel)
    for a, b in zip(g, x):
        assert a.shape == b.shape and a.dtype == b.dtype


@pytest.mark.parametrize("kind", ["surface_pressure", "minimum_surface_pressure", "kinetic_energy",
                                  "temperature_850hPa"])
def test_box_cost_gradients_match_central_differences(mesh, base, rng, kind):
    ctx = context(mesh)
    if kind == "minimum_surface_pressure":
        cost = MinimumSurfacePressureCost(ctx, PHYSICS, BOX, (0.0, 1.0), 300.0, "sensitivity.cost")
    elif kind == "kinetic_energy":
        cost = KineticEnergyCost(ctx, PHYSICS, BOX, (0.0, 1.0), (3, 14), 26, "sensitivity.cost")
    else:
        cls = SurfacePressureCost if kind == "surface_pressure" else Temperature850Cost
        cost = cls(ctx, PHYSICS, BOX, (0.0, 1.0), "sensitivity.cost")
    x = jw06_like(mesh, base, rng)
    assert sorted(cost.steps) == [0, 1, 2] and cost.value(3, x) == 0.0 and cost.gradient(3, x) is None
    assert_gradient(cost, 1, x, rng)


def test_box_means_are_their_definitions(mesh, base, rng):
    ctx = context(mesh)
    x = jw06_like(mesh, base, rng)
    lat, lon = np.degrees(mesh.latCell), np.degrees(mesh.lonCell) % 360
    inside = (lat >= BOX[0][0]) & (lat <= BOX[0][1]) & (lon >= BOX[1][0]) & (lon <= BOX[1][1])
    w = np.where(inside, mesh.areaCell, 0.0) / mesh.areaCell[inside].sum()
    ps = PHYSICS.p_top + GRAVITY * x[0].sum(axis=1)
    cost = SurfacePressureCost(ctx, PHYSICS, BOX, None, "sensitivity.cost")
    assert cost.value(N_STEPS, x) == pytest.approx(float((w * ps).sum()), rel=1e-13)
    np.testing.assert_allclose(surface_pressure(mesh, x[0], PHYSICS), ps, rtol=1e-13)
    import meshops
    ke = meshops.ke_e2c(mesh, x[2])
    cost = KineticEnergyCost(ctx, PHYSICS, BOX, None, (1, 26), 26, "sensitivity.cost")
    assert cost.value(N_STEPS, x) == pytest.approx(float((w * (x[0] * ke).sum(1)).sum()), rel=1e-13)
    p, theta, T = temperature(mesh, x[0], x[1], PHYSICS)
    np.testing.assert_allclose(T, theta * (p / 1e5) ** (2 / 7), rtol=1e-13)
    t850 = Temperature850Cost(ctx, PHYSICS, BOX, None, "sensitivity.cost").value(N_STEPS, x)
    assert 230.0 < t850 < 300.0


def test_minimum_surface_pressure_is_a_smooth_minimum_of_the_box(mesh, base, rng):
    """Its definition on a fresh state; tau log(1 / a_min) or closer above the box's least p_s,
    the box mean less the variance / (2 tau) as tau grows; a softness that is not a positive pressure refused by name."""
    ctx = context(mesh)
    x = jw06_like(mesh, base, rng)
    lat, lon = np.degrees(mesh.latCell), np.degrees(mesh.lonCell) % 360
    inside = (lat >= BOX[0][0]) & (lat <= BOX[0][1]) & (lon >= BOX[1][0]) & (lon <= BOX[1][1])
    a = mesh.areaCell[inside] / mesh.areaCell[inside].sum()
    ps = (PHYSICS.p_top + GRAVITY * x[0].sum(axis=1))[inside]
    for tau in (10.0, 300.0):
        cost = MinimumSurfacePressureCost(ctx, PHYSICS, BOX, None, tau, "sensitivity.cost")
        expected = -tau * np.log((a * np.exp(-(ps - ps.min()) / tau)).sum()) + ps.min()
        assert cost.value(N_STEPS, x) == pytest.approx(expected, rel=1e-13)
        assert ps.min() <= cost.value(N_STEPS, x) <= ps.min() + tau * np.log(1 / a.min())
    tau = 1e9                          # the mean less the variance / (2 tau), to O(1 / tau^2)
    mean = float((a * ps).sum())
    wide = MinimumSurfacePressureCost(ctx, PHYSICS, BOX, None, tau, "sensitivity.cost")
    assert wide.value(N_STEPS, x) == pytest.approx(mean - (a * (ps - mean) ** 2).sum() / (2 * tau),
                                                   abs=1e-5)
    for bad in (0.0, -5.0, float("nan")):
        with pytest.raises(CostError, match=rf"sensitivity.cost.softness = {bad}: expected a "
                                            r"positive pressure \(Pa\)"):
            MinimumSurfacePressureCost(ctx, PHYSICS, BOX, None, bad, "sensitivity.cost")


@pytest.mark.parametrize("tables", ["surface_pressure", "temperature", "both"])
def test_misfit_gradient_matches_central_differences(mesh, base, rng, tmp_path, tables):
    x = jw06_like(mesh, base, rng)
    p, theta, T = temperature(mesh, x[0], x[1], PHYSICS)
    n = 40
    cells = rng.choice(mesh.nCells, n, replace=False)
    time = np.full(n, 2 * DT)
    ps_obs = (cells, time, surface_pressure(mesh, x[0], PHYSICS)[cells] + 300 * rng.standard_normal(n),
              np.full(n, 150.0))
    lev = rng.integers(0, 26, n)
    t_obs = (cells, lev, time, T[cells, lev] + rng.standard_normal(n), np.full(n, 0.8))
    write_observations(tmp_path / "obs.nc", ps_obs if tables != "temperature" else None,
                       t_obs if tables != "surface_pressure" else None)
    cost = ObservationCost(context(mesh), PHYSICS, 26, tmp_path / "obs.nc")
    assert cost.steps == {2} and cost.units == "1"
    expected = 0.0
    if tables != "temperature":
        expected += 0.5 * float((((ps_obs[2] - surface_pressure(mesh, x[0], PHYSICS)[cells]) / 150.0) ** 2).sum())
    if tables != "surface_pressure":
        expected += 0.5 * float((((t_obs[3] - T[cells, lev]) / 0.8) ** 2).sum())
    assert cost.value(2, x) == pytest.approx(expected, rel=1e-12)
    assert_gradient(cost, 2, x, rng)


def _file(tmp_path, **change):
    """A valid observation file with one variable's first value changed."""
    n = 5
    ps = [np.arange(n), np.full(n, DT), np.full(n, 1.0e5), np.full(n, 100.0)]
    t = [np.arange(n), np.arange(n), np.full(n, DT), np.full(n, 280.0), np.full(n, 1.0)]
    path = tmp_path / "obs.nc"
    write_observations(path, ps, t)
    import netCDF4
    with netCDF4.Dataset(path, "a") as ds:
        for name, value in change.items():
            ds[name][0] = value
    return path


@pytest.mark.parametrize("change, message", [
    ({"temperature": -9999.0}, r"temperature\[0\] = -9999 K \(cell 1, time 1800 s\): expected a "
                               r"temperature > 0 K; mark a missing observation with"),
    ({"surface_pressure": np.nan}, r"surface_pressure\[0\] = nan Pa \(cell 1, time 1800 s\): "
                                   r"expected a finite surface pressure > 0 Pa"),
    ({"temperature_level": 27}, r"temperature_level\[0\] = 27: expected a 1-based layer \(1: the "
                                r"lowest\) in \[1, 26\]"),
    ({"surface_pressure_cell": 100000}, r"surface_pressure_cell\[0\] = 100000: expected a 1-based "
                                        r"cell index in \[1, 642\]"),
    ({"temperature_time": 1000.0}, r"temperature_time\[0\] = 1000 s: expected a time of the run"),
    ({"surface_pressure_error": 0.0}, r"surface_pressure_error\[0\] = 0 Pa \(cell 1, time 1800 s\): "
                                      r"expected a positive observation error \(Pa\)"),
])
def test_impossible_observations_are_refused_naming_file_variable_and_value(mesh, tmp_path, change,
                                                                           message):
    path = _file(tmp_path, **change)
    with pytest.raises(CostError, match=message) as err:
        ObservationCost(context(mesh), PHYSICS, 26, path)
    assert str(err.value).startswith(str(path)) and "\n" not in str(err.value)


def test_observations_marked_missing_are_left_out(mesh, base, rng, tmp_path):
    import netCDF4

    path = tmp_path / "obs.nc"
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("nObsTemperature", 3)
        for name, values in (("temperature_cell", [1, 2, 3]), ("temperature_level", [1, 1, 2]),
                             ("temperature_time", [0.0, 0.0, 0.0]), ("temperature_error", [1.0] * 3)):
            ds.createVariable(name, "f8", ("nObsTemperature",))[:] = values
        var = ds.createVariable("temperature", "f8", ("nObsTemperature",), fill_value=-9999.0)
        var[:] = [280.0, -9999.0, 270.0]
    x = jw06_like(mesh, base, rng)
    cost = ObservationCost(context(mesh), PHYSICS, 26, path)
    T = temperature(mesh, x[0], x[1], PHYSICS)[2]
    expected = 0.5 * ((T[0, 0] - 280.0) ** 2 + (T[2, 1] - 270.0) ** 2)
    assert cost.value(0, x) == pytest.approx(expected, rel=1e-12)


def test_a_file_without_observation_tables_is_refused(mesh, tmp_path):
    import netCDF4

    with netCDF4.Dataset(tmp_path / "obs.nc", "w") as ds:
        ds.createDimension("nObs", 1)
        ds.createVariable("h", "f8", ("nObs",))[:] = 1.0
    with pytest.raises(CostError, match=r"obs.nc: neither variable 'surface_pressure' nor "
                                        r"'temperature'"):
        ObservationCost(context(mesh), PHYSICS, 26, tmp_path / "obs.nc")


@pytest.mark.parametrize("layers", [(0, 3), (5, 4), (1, 27)])
def test_kinetic_energy_layers_out_of_range_are_named(mesh, layers):
    with pytest.raises(CostError, match=rf"sensitivity.cost.layers = \[{layers[0]}, {layers[1]}\]: "
                                        r"expected 1 <= bottom <= top <= 26"):
        KineticEnergyCost(context(mesh), PHYSICS, BOX, None, layers, 26, "sensitivity.cost")


@pytest.mark.mpi
def test_two_ranks_give_one_process_values_and_gradients_bitwise():
    mpiexec = pathlib.Path(sys.executable).parent / "mpiexec"
    env = dict(os.environ, MESHOPS_MPI_TESTS="1", PYTHONPATH=str(ROOT))
    out = subprocess.run([str(mpiexec), "-n", "2", sys.executable, "-m", "pytest", "-q", "-x",
                          "-p", "no:cacheprovider", "tests/mpi/test_hydrostatic_costs.py"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "passed" in out.stdout


def _scaled_file(tmp_path, name, values, units=None):
    """A valid observation file whose `name` values are `values` (the other table's plausible),
    its units attribute `units` where given."""
    import netCDF4

    n = len(values)
    ps = [np.arange(n), np.full(n, DT), np.full(n, 1.0e5), np.full(n, 100.0)]
    t = [np.arange(n), np.arange(n), np.full(n, DT), np.full(n, 280.0), np.full(n, 1.0)]
    (ps if name == "surface_pressure" else t)[-2] = np.asarray(values)
    path = tmp_path / "obs.nc"
    write_observations(path, ps, t)
    if units is not None:
        with netCDF4.Dataset(path, "a") as ds:
            ds[name].units = units
    return path


@pytest.mark.parametrize("name, low, high, units, plausible", [
    ("surface_pressure", 950.0, 1040.0, "Pa", "[30000, 110000] Pa"),       # hPa
    ("temperature", 5.0, 35.0, "K", "[150, 350] K")])                      # degrees Celsius
def test_observations_in_other_units_are_refused_naming_the_range(mesh, tmp_path, rng, name, low,
                                                                  high, units, plausible):
    """p_s in hPa and T in degrees Celsius (positive: not caught as impossible), with the units
    attribute the model expects: refused in one line naming the file, the variable, the first
    value, its cell and time, the plausible range and the units."""
    values = rng.uniform(low, high, 6)
    path = _scaled_file(tmp_path, name, values)
    with pytest.raises(CostError) as err:
        ObservationCost(context(mesh), PHYSICS, 26, path)
    message = str(err.value)
    assert message.startswith(f"{path}: {name}[0] = {values[0]:g} {units} (cell 1, time {DT:g} s): "
                              f"expected a plausible {name.replace('_', ' ')} in {plausible}"), \
        message
    assert f"expected {units})" in message and "\n" not in message


@pytest.mark.parametrize("name, value", [("surface_pressure", 2.0e5), ("temperature", 400.0),
                                         ("temperature", 100.0)])
def test_implausible_observations_are_refused(mesh, tmp_path, rng, name, value):
    values = np.full(4, {"surface_pressure": 1.0e5, "temperature": 280.0}[name])
    i = int(rng.integers(4))
    values[i] = value * rng.uniform(1.0, 1.2)
    path = _scaled_file(tmp_path, name, values)
    plausible = {"surface_pressure": "[30000, 110000] Pa", "temperature": "[150, 350] K"}[name]
    with pytest.raises(CostError, match=rf"{name}\[{i}\] = {values[i]:g} .*expected a plausible "
                                        rf"{name.replace('_', ' ')} in {re.escape(plausible)}"):
        ObservationCost(context(mesh), PHYSICS, 26, path)


@pytest.mark.parametrize("name, units", [("surface_pressure", "hPa"), ("surface_pressure", "mb"),
                                         ("temperature", "degC"), ("surface_pressure_error", "hPa")])
def test_observations_declaring_other_units_are_refused(mesh, tmp_path, name, units):
    import netCDF4

    path = _file(tmp_path)
    with netCDF4.Dataset(path, "a") as ds:
        ds[name].units = units
    expected = "K" if name.startswith("temperature") else "Pa"
    with pytest.raises(CostError, match=rf"obs.nc: variable '{name}' has units = '{units}'; "
                                        rf"expected {expected}"):
        ObservationCost(context(mesh), PHYSICS, 26, path)
