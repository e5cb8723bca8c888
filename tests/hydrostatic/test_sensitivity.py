"""Sensitivity runs of the hydrostatic core from config, for real through run_model.py in a
subprocess: the gradient file (MPAS dimensions, units "<J units> <x units>-1", the mesh) and its
maps; 2 ranks under mpiexec write the one process's gradients bitwise; --check-adjoint passes its
dot-product and Taylor tests; bad sensitivity sections stop at load in one line naming the key;
the controls' gradients are the chain rule of the model's."""
import netCDF4
import numpy as np
import pytest
import yaml

from tests.swm.test_faults import error_of, ok, run_model

from .test_costs import A, B

SENSITIVITY = {"cost": {"kind": "surface_pressure", "box": {"lat": [35, 65], "lon": [40, 120]}},
               "controls": ["theta", "u", "surface_pressure", "phi_s"],
               "checkpointing": {"schedule": "multistage", "snapshots_in_ram": 4}}


def config(tmp_path, name, level=3, days=2.0, dt=1800, **sensitivity):
    sens = {**SENSITIVITY, "output": str(tmp_path / f"{name}.nc"), **sensitivity}
    tree = {"model": "hydrostatic", "mesh": {"generate": {"level": level, "lloyd": 50}},
            "case": {"name": "jw06_baroclinic"}, "time": {"days": days, "dt": dt},
            "diffusion": {"visc4": 1.0e16 if level == 3 else 1.0e17},
            "output": {"path": str(tmp_path / f"{name}.history.nc"), "interval_hours": 6},
            "sensitivity": sens}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(tree))
    return path


@pytest.mark.mpi
def test_gradients_on_one_and_two_ranks_are_bitwise_with_units_and_maps(tmp_path):
    ok(run_model(config(tmp_path, "one")))
    ok(run_model(config(tmp_path, "two"), ranks=2))
    with netCDF4.Dataset(tmp_path / "one.nc") as a, netCDF4.Dataset(tmp_path / "two.nc") as b:
        assert a["dJdtheta0"].dimensions == ("Time", "nCells", "nVertLevels")
        assert a["dJdu0"].dimensions == ("Time", "nEdges", "nVertLevels")
        assert a["dJdps0"].dimensions == a["dJdphi_s"].dimensions == ("Time", "nCells")
        assert a["dJdtheta0"].units == "Pa K-1" and a["dJdu0"].units == "Pa (m s-1)-1"
        assert a["dJdps0"].units == "Pa Pa-1" and a["dJdphi_s"].units == "Pa (m2 s-2)-1"
        assert a["J"].units == "Pa" and 9.5e4 < a["J"][0] < 1.05e5
        assert "areaCell" in a.variables and a.dimensions["nCells"].size == 642
        for name in ("dJdtheta0", "dJdu0", "dJdps0", "dJdphi_s", "J"):
            assert np.array_equal(a[name][:], b[name][:]), name
        # dJ/dps0 of a box mean of p_s two days on: about the box's own share, positive there
        ps = a["dJdps0"][0]
        assert 0.5 < float(ps.sum()) < 1.5 and float(np.abs(a["dJdtheta0"][0]).max()) > 0
    for name in ("dJdtheta0", "dJdu0", "dJdps0", "dJdphi_s", "dJdtheta0.section"):
        assert (tmp_path / f"one.{name}.png").stat().st_size > 1000, name


@pytest.mark.parametrize("cost", [
    {"kind": "temperature_850hPa", "box": {"lat": [30, 60], "lon": [0, 90]}},
    {"kind": "minimum_surface_pressure", "softness": 50, "box": {"lat": [30, 60], "lon": [0, 90]}},
    {"kind": "kinetic_energy", "layers": [1, 10], "box": {"lat": [30, 60], "lon": [0, 90]},
     "window_hours": [3, 6]}])
def test_check_adjoint_passes_for_the_new_core(tmp_path, cost):
    out = ok(run_model(config(tmp_path, "check", level=2, days=0.25, cost=cost,
                              controls=["theta", "u", "mass", "phi_s"]), "--check-adjoint"))
    assert "dot-product test of the 12-step run" in out.stdout and "(pass," in out.stdout
    assert "Taylor test: minimum rate" in out.stdout and "(pass, >= 1.9)" in out.stdout


@pytest.mark.parametrize("change, message", [
    ({"cost": {"kind": "vorticity"}}, "sensitivity.cost.kind = 'vorticity': Input should be "
                                      "'surface_pressure', 'minimum_surface_pressure', "
                                      "'kinetic_energy', 'temperature_850hPa' or 'misfit'"),
    ({"cost": {"kind": "minimum_surface_pressure", "softness": -50}},
     "sensitivity.cost.softness = -50: Input should be greater than 0"),
    ({"cost": {"kind": "surface_pressure", "softness": 50}},
     "softness = 50.0: only kind minimum_surface_pressure takes a softness"),
    ({"controls": ["theta", "h"]}, "sensitivity.controls.1 = 'h': Input should be 'theta', 'u', "
                                   "'mass', 'surface_pressure' or 'phi_s'"),
    ({"controls": ["mass", "surface_pressure"]}, "give mass or surface_pressure, not both"),
    ({"cost": {"kind": "kinetic_energy", "layers": [3, 40]}},
     "sensitivity.cost.layers = [3, 40]: expected 1 <= bottom <= top <= 26"),
    ({"cost": {"kind": "surface_pressure", "window_hours": [0, 100]}},
     "sensitivity.cost.window_hours = [0.0, 100.0]: ends after the run's length"),
    ({"cost": {"kind": "surface_pressure", "box": {"lat": [10, 10.001], "lon": [0, 1]}}},
     "sensitivity.cost.box = lat [10.0, 10.001], lon [0.0, 1.0] deg: contains no cell centre"),
    ({"cost": {"kind": "misfit"}}, "cost.observations is needed with kind 'misfit'"),
])
def test_bad_sensitivity_sections_are_one_line_naming_the_key(tmp_path, change, message):
    out = run_model(config(tmp_path, "bad", level=2, days=0.25, **change))
    assert out.returncode == 2
    err = error_of(out.stderr)
    assert message in err and err.startswith("run_model.py: error: ")


def test_controls_are_the_chain_rule_of_the_models_gradients(rng):
    """dJ/dtheta0, dJ/dmass0 and dJ/dps0 (theta fixed) against J of the perturbed initial
    fields, for J linear in (mass, theta_mass) with random weights."""
    from types import SimpleNamespace

    from hydrostatic.dynamics import Physics
    from hydrostatic.sensitivity import control_gradients
    from framework.constants import GRAVITY

    n, nlev = 30, 26
    physics = Physics(p_top=float(A[-1]), dB=B[:-1] - B[1:])
    ps = 1.0e5 + 500 * rng.standard_normal(n)
    dA = A[:-1] - A[1:]
    mass = (dA + physics.dB * ps[:, None]) / GRAVITY
    theta = 300 + 10 * rng.standard_normal((n, nlev))
    wm, wt = rng.standard_normal((n, nlev)), rng.standard_normal((n, nlev))

    def J(mass, theta):
        return float((wm * mass + wt * mass * theta).sum())

    grads = (wm, wt, np.zeros((4, nlev)), np.zeros(n))
    s = SimpleNamespace(model=SimpleNamespace(physics=physics))
    got = control_gradients(s, grads, (mass, mass * theta, None), ["theta", "mass"])
    got.update(control_gradients(s, grads, (mass, mass * theta, None), ["surface_pressure"]))
    d = rng.standard_normal((n, nlev))
    dps = rng.standard_normal(n)
    eps = 1.0          # J is linear in each of theta, mass and p_s: a central difference is exact,
    #                    and a step of 1 keeps it far above J's round-off (J ~ 1e7)
    assert (J(mass, theta + eps * d) - J(mass, theta - eps * d)) / (2 * eps) == \
        pytest.approx(float((got["theta"][2] * d).sum()), rel=1e-6)
    assert (J(mass + eps * d, theta) - J(mass - eps * d, theta)) / (2 * eps) == \
        pytest.approx(float((got["mass"][2] * d).sum()), rel=1e-6)
    plus = (dA + physics.dB * (ps + eps * dps)[:, None]) / GRAVITY
    minus = (dA + physics.dB * (ps - eps * dps)[:, None]) / GRAVITY
    assert (J(plus, theta) - J(minus, theta)) / (2 * eps) == \
        pytest.approx(float((got["surface_pressure"][2] * dps).sum()), rel=1e-6)
