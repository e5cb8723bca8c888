"""4D-Var twins of the hydrostatic core from config, for real through run_model.py in a
subprocess (level 2, 26 levels, 6 hours): the cost falls by a large factor and the initial state's
error with it; the observation file holds p_s and T at the observed cells and layers; 2 ranks under
mpiexec give the one process's history and analysis bitwise; a truth run that blows up stops on
the watchdog with nothing written; bad fourdvar sections stop at load in one line naming the key,
the value and what was expected."""
import netCDF4
import numpy as np
import pytest
import yaml

from tests.swm.test_faults import error_of, ok, run_model

FOURDVAR = {"observation_hours": [3, 6], "observation_error_ps": 5,
            "observation_error_temperature": 0.05, "first_guess_amplitude_ps": 500,
            "first_guess_amplitude_theta": 2, "background_error_ps": 500,
            "background_error_theta": 2, "iterations": 15}


def config(tmp_path, name, **fourdvar):
    tree = {"model": "hydrostatic", "mesh": {"generate": {"level": 2, "lloyd": 10}},
            "case": {"name": "jw06_baroclinic"}, "time": {"days": 0.25, "dt": 1800},
            "diffusion": {"visc4": 1.0e17},
            "output": {"path": str(tmp_path / f"{name}.history.nc")},
            "restart": {"path": str(tmp_path / f"{name}.restart.nc")},
            "fourdvar": {**FOURDVAR, "output": str(tmp_path / f"{name}.nc"), **fourdvar}}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(tree))
    return path


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    """A twin on one process with a fresh seed, observed fraction and layers: (its folder, its
    fourdvar section, its stderr)."""
    rng = np.random.default_rng()
    tmp_path = tmp_path_factory.mktemp("twin")
    levels = sorted(int(k) for k in rng.choice(np.arange(1, 27), 8, replace=False))
    settings = {"seed": int(rng.integers(2**31)), "observed_fraction": float(rng.uniform(0.7, 0.9)),
                "observed_levels": levels}
    print(f"twin: {settings}")
    out = ok(run_model(config(tmp_path, "one", **settings)))
    return tmp_path, settings, out.stderr


def history(path) -> dict:
    names = ("iteration", "cost", "gradient_norm", "ps_rms_error", "theta_rms_error",
             "u_rms_error", "surface_pressure", "theta", "u")
    with netCDF4.Dataset(path) as ds:
        ds.set_auto_mask(False)
        return {name: ds[name][:] for name in names}


def test_the_twin_recovers_the_initial_state(twin):
    tmp_path, settings, stderr = twin
    h = history(tmp_path / "one.nc")
    assert h["iteration"][-1] <= 15 and h["u_rms_error"][0] == 0.0
    assert h["cost"][0] / h["cost"][-1] > 20, h["cost"]
    # the analysis's error against the first guess's, over 42 draws of this fixture: p_s 0.37-0.84,
    # theta 0.62-0.82 (p_s at day 0 is observed only through the later states)
    assert h["ps_rms_error"][-1] < 0.95 * h["ps_rms_error"][0], h["ps_rms_error"]
    assert h["theta_rms_error"][-1] < 0.9 * h["theta_rms_error"][0], h["theta_rms_error"]
    assert f"iteration {int(h['iteration'][-1])}: J " in stderr and "rms error of ps0 " in stderr
    with netCDF4.Dataset(tmp_path / "one.nc") as ds:
        ds.set_auto_mask(False)
        assert ds["theta"].dimensions == ("Time", "nCells", "nVertLevels")
        assert ds["u"].dimensions == ("Time", "nEdges", "nVertLevels")
        assert ds["surface_pressure"].units == "Pa" and ds.core_name == "atmosphere"
        assert ds.dimensions["nVertLevels"].size == 26 and ds["hyai"].size == 27
        error = ds["surface_pressure"][0] - ds["surface_pressure_truth"][0]
        first = ds["surface_pressure_first_guess"][0] - ds["surface_pressure_truth"][0]
        assert np.sqrt(np.mean(error ** 2)) == pytest.approx(h["ps_rms_error"][-1], rel=1e-12)
        assert np.sqrt(np.mean(first ** 2)) == pytest.approx(h["ps_rms_error"][0], rel=1e-12)
    with netCDF4.Dataset(tmp_path / "one.observations.nc") as ds:
        ds.set_auto_mask(False)
        n_cells = int(round(settings["observed_fraction"] * 162))
        assert ds.dimensions["nObsSurfacePressure"].size == 2 * n_cells
        assert ds.dimensions["nObsTemperature"].size == 2 * n_cells * 8
        assert sorted(set(ds["temperature_level"][:].tolist())) == settings["observed_levels"]
        assert set(ds["surface_pressure_time"][:].tolist()) == {10800.0, 21600.0}
        assert 9.0e4 < ds["surface_pressure"][:].min() and ds["surface_pressure"][:].max() < 1.1e5
    assert (tmp_path / "one.png").stat().st_size > 10_000


@pytest.mark.mpi
def test_two_ranks_give_the_one_process_history_bitwise(twin):
    tmp_path, settings, _ = twin
    ok(run_model(config(tmp_path, "two", **settings), ranks=2))
    one, two = history(tmp_path / "one.nc"), history(tmp_path / "two.nc")
    for name in one:
        assert np.array_equal(one[name], two[name]), name


@pytest.mark.parametrize("change, message", [
    ({"observation_hours": [1.2, 6]}, "fourdvar.observation_hours[0] = 1.2: not a whole number of "
                                      "steps of time.dt = 1800 s; expected a multiple of 0.5 h"),
    ({"observation_hours": [3, 9]}, "fourdvar.observation_hours[1] = 9.0: outside the run's length "
                                    "time.days = 0.25 (6 h); expected times within [0, 6] h"),
    ({"observation_error_ps": -5}, "fourdvar.observation_error_ps = -5: Input should be greater "
                                   "than 0"),
    ({"background_error_theta": 0}, "fourdvar.background_error_theta = 0: Input should be greater "
                                    "than 0"),
    ({"first_guess_amplitude_ps": -1.5}, "fourdvar.first_guess_amplitude_ps = -1.5: Input should "
                                         "be greater than or equal to 0"),
    ({"observed_levels": [1, 40]}, "fourdvar.observed_levels[1] = 40: expected a layer in [1, 26] "
                                   "(vertical.nVertLevels)"),
    ({"observed_levels": [0, 3]}, "fourdvar.observed_levels.0 = 0: Input should be greater than "
                                  "or equal to 1"),
    ({"observed_fraction": 1.5}, "fourdvar.observed_fraction = 1.5: Input should be less than or "
                                 "equal to 1"),
])
def test_bad_fourdvar_sections_are_one_line_naming_the_key(tmp_path, change, message):
    out = run_model(config(tmp_path, "bad", **change))
    assert out.returncode == 2
    err = error_of(out.stderr)
    assert message in err and err.startswith("run_model.py: error: "), err
    assert not (tmp_path / "bad.nc").exists() and not (tmp_path / "bad.observations.nc").exists()


def test_fourdvar_with_sensitivity_or_resume_is_refused(tmp_path):
    path = config(tmp_path, "both")
    tree = yaml.safe_load(path.read_text())
    tree["sensitivity"] = {"cost": {"kind": "surface_pressure"}}
    path.write_text(yaml.safe_dump(tree))
    assert "give at most one of sensitivity and fourdvar" in error_of(run_model(path).stderr)
    del tree["sensitivity"]
    tree["restart"]["resume"] = True
    path.write_text(yaml.safe_dump(tree))
    assert "restart.resume: a 4D-Var run starts from the case's initial state" in \
        error_of(run_model(path).stderr)


def test_a_twin_that_blows_up_stops_on_the_watchdog_and_writes_nothing(tmp_path):
    path = config(tmp_path, "blowup", observation_hours=[48])
    tree = yaml.safe_load(path.read_text())
    tree["time"] = {"days": 2, "dt": 14400}               # far past the level-2 mesh's limit
    path.write_text(yaml.safe_dump(tree))
    out = run_model(path)
    assert out.returncode == 3
    line = error_of(out.stderr)
    assert line.startswith("run_model.py: stopped: step ") and "(the truth run); no analysis " \
        f"written to fourdvar.output = {str(tmp_path / 'blowup.nc')!r}" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blowup.yaml", "cache"]
