"""Sensitivity runs, adjoint checks and the 4D-Var twin from configs, through run_model.py: the
gradient file and its maps, --check-adjoint's dot-product test and Taylor table, the same gradient
on 1 and 3 ranks, clear errors for bad sensitivity configs, and the twin's convergence."""
import os
import pathlib
import shutil
import subprocess
import sys

import netCDF4
import numpy as np
import PIL.Image
import pytest
import yaml

from swm.costs import write_observations

ROOT = pathlib.Path(__file__).resolve().parents[2]
ENV = {**os.environ,
       "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def config(tmp_path, name, sensitivity=None, **sections):
    tree = {"mesh": {"generate": {"level": 3, "lloyd": 10}}, "case": {"name": "williamson5"},
            "time": {"days": 0.25, "dt": 1800}, "output": {"interval_hours": 6}}
    if sensitivity is not False:
        tree["sensitivity"] = {"cost": {"kind": "mean", "field": "h",
                                        "box": {"lat": [20, 50], "lon": [300, 340]}},
                               "output": str(tmp_path / f"{name}.nc"), **(sensitivity or {})}
    tree.update(sections)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(tree))
    return path


def run(path, *extra, ranks=None):
    command = [sys.executable, str(ROOT / "run_model.py"), str(path), "--no-progress", *extra]
    if ranks:
        mpiexec = pathlib.Path(sys.executable).parent / "mpiexec"
        command = [str(mpiexec) if mpiexec.exists() else shutil.which("mpiexec"), "-n", str(ranks),
                   *command]
    env = ENV if ranks else {**ENV, "MESHOPS_NO_MPI": "1"}      # one process: no MPI runtime
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)


def gradients(path):
    with netCDF4.Dataset(path) as ds:
        ds.set_auto_mask(False)
        return {name: ds[name][0, :, 0] for name in ("dJdh0", "dJdu0", "dJdb")}, float(ds["J"][0])


def dimensions(units: str) -> dict:
    """The powers of base units of a udunits product of powers ("m2 (m s-1)-1" -> {m: 1, s: 1}):
    symbols with integer exponents, "(...)N" groups, "1"; anything else fails the test."""
    import collections
    import re

    powers = collections.Counter()
    for group, inner, power, symbol, exponent in re.findall(
            r"(\(([^()]*)\)(-?\d+))|([A-Za-z]+)(-?\d*)", units):
        if group:
            for name, p in dimensions(inner).items():
                powers[name] += p * int(power)
        elif symbol:
            powers[symbol] += int(exponent or 1)
    tokens = re.sub(r"\([^()]*\)-?\d+|[A-Za-z]+-?\d*|\b1\b", "", units)
    assert not tokens.strip(), f"{units!r}: not a product of powers of unit symbols"
    return {name: p for name, p in powers.items() if p}


def assert_gradient_units(path, cost_units):
    """J has `cost_units`; each gradient's units are J's per its control's, and its long_name says
    so in words."""
    controls = {"dJdh0": ("the initial h", "m"), "dJdu0": ("the initial u", "m s-1"),
                "dJdb": ("the topography b", "m")}
    with netCDF4.Dataset(path) as ds:
        assert ds["J"].units == cost_units
        for name, (what, units) in controls.items():
            var = ds[name]
            assert var.long_name == f"gradient of J ({cost_units}) with respect to {what} ({units})"
            expected = dimensions(cost_units)
            for symbol, p in dimensions(units).items():
                expected[symbol] = expected.get(symbol, 0) - p
            assert dimensions(var.units) == {k: p for k, p in expected.items() if p}, var.units
            assert var.units.startswith("" if cost_units == "1" else cost_units + " ")


def test_sensitivity_run_writes_gradients_and_maps(tmp_path):
    path = config(tmp_path, "sens", {"checkpointing": {"schedule": "revolve", "snapshots_in_ram": 3}})
    out = run(path)
    assert out.returncode == 0, out.stderr
    assert "recomputed" in out.stderr and "gradients written to" in out.stderr
    grads, value = gradients(tmp_path / "sens.nc")
    assert grads["dJdh0"].shape == (642,) and grads["dJdu0"].shape == (1920,)
    assert all(np.isfinite(g).all() and np.abs(g).max() > 0 for g in grads.values())
    assert 4000 < value < 7000                         # a mean thickness of case 5, in m
    assert_gradient_units(tmp_path / "sens.nc", "m")
    with netCDF4.Dataset(tmp_path / "sens.nc") as ds:
        assert (ds["dJdh0"].units, ds["dJdu0"].units) == ("m m-1", "m (m s-1)-1")
    for name in ("dJdh0", "dJdu0", "dJdb"):
        assert (tmp_path / f"sens.{name}.png").stat().st_size > 10_000


@pytest.mark.mpi
def test_gradient_on_three_ranks_is_bitwise_one_process(tmp_path):
    """The vorticity energy in a box over a window, APVM on: the deterministic gradient that three
    ranks write equals one process's bit for bit (J, a sum over ranks, to round-off)."""
    one = config(tmp_path, "one", {"cost": {"kind": "energy", "field": "vorticity",
                                            "box": {"lat": [0, 60], "lon": [200, 340]},
                                            "window_hours": [3, 6]}, "plot": False},
                 diffusion={"apvm": 0.5})
    three = tmp_path / "three.yaml"
    three.write_text(one.read_text().replace("one.nc", "three.nc"))
    assert run(one).returncode == 0
    out = run(three, ranks=3)
    assert out.returncode == 0, out.stderr
    (g1, j1), (g3, j3) = gradients(tmp_path / "one.nc"), gradients(tmp_path / "three.nc")
    assert j3 == pytest.approx(j1, rel=1e-13)
    for name in g1:
        assert np.array_equal(g3[name], g1[name]), name
    assert_gradient_units(tmp_path / "three.nc", "s-2")


@pytest.mark.parametrize("sensitivity, ranks", [
    ({"adjoint_mode": "deterministic"}, None),
    ({"adjoint_mode": "atomic", "checkpointing": {"schedule": "multistage", "snapshots_in_ram": 1,
                                                 "snapshots_on_disk": 2}}, 4),
])
def test_check_adjoint_prints_the_dot_product_test_and_taylor_table(tmp_path, sensitivity, ranks):
    path = config(tmp_path, "check", sensitivity, diffusion={"visc4": 1e15})
    out = run(path, "--check-adjoint", ranks=ranks)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    dot = next(line for line in lines if line.startswith("dot-product test of the 12-step run"))
    assert float(dot.split("relative difference ")[1].split()[0]) <= 1e-12
    rates = [float(line.split()[2]) for line in lines
             if len(line.split()) == 3 and line.split()[0].replace(".", "").isdigit()]
    assert len(rates) == 5 and min(rates) >= 1.9
    assert "Taylor test: minimum rate" in out.stdout and "(pass" in lines[-1]


def test_check_adjoint_of_an_observation_misfit(tmp_path):
    rng = np.random.default_rng()
    obs = tmp_path / "obs.nc"
    cells = rng.choice(642, 40, replace=False)
    write_observations(obs, cells, np.repeat([3 * 1800.0, 12 * 1800.0], 20),
                       5500 + 100 * rng.standard_normal(40), np.full(40, 5.0))
    path = config(tmp_path, "misfit", {"cost": {"kind": "misfit", "observations": str(obs)}})
    out = run(path, "--check-adjoint")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "(pass, tolerance 1e-12)" in out.stdout and "Taylor test: minimum rate" in out.stdout


@pytest.mark.parametrize("change, message", [
    ({"cost": {"kind": "variance"}}, "sensitivity.cost.kind = 'variance': Input should be 'mean', "
                                     "'energy' or 'misfit'"),
    ({"cost": {"kind": "mean", "box": {"lat": [10, 10.01], "lon": [0, 0.01]}}},
     "sensitivity.cost.box = lat [10.0, 10.01], lon [0.0, 0.01] deg: contains no cell centre"),
    ({"cost": {"kind": "mean", "box": {"lat": [50, 20]}}},
     "sensitivity.cost.box = '{...}': lat = [50.0, 20.0]: expected -90 <= south <= north <= 90"),
    ({"cost": {"kind": "misfit"}}, "cost.observations is needed with kind 'misfit'"),
    ({"cost": {"kind": "misfit", "observations": "missing.nc"}},
     "observations = 'missing.nc': no such file"),
    ({"checkpointing": {"schedule": "revolve"}},
     "snapshots_in_ram = 0: schedule 'revolve' needs at least 1"),
    ({"cost": {"kind": "energy", "field": "vorticity", "window_hours": [3, 6.5]}},
     "  sensitivity.cost.window_hours = [3.0, 6.5]: ends after the run's length time.days = 0.25 "
     "(6 h); expected a window within [0, 6] h"),
    ({"cost": {"kind": "mean", "window_hours": [7, 8]}},
     "  sensitivity.cost.window_hours = [7.0, 8.0]: ends after the run's length"),
])
def test_bad_sensitivity_configs_are_named(tmp_path, change, message):
    path = config(tmp_path, "bad", change)
    out = run(path, "--check-adjoint")
    assert out.returncode == 2 and message in out.stderr, out.stderr


def test_a_full_disk_while_writing_snapshots_names_the_file(tmp_path):
    """Disk snapshots (multistage) on a disk that is full for them (a file size limit below a
    snapshot's size, after a run that cached the mesh): one line naming the config key, the
    snapshot file and the full disk; no snapshot or temporary is left. (One process.)"""
    import resource
    import signal

    folder = tmp_path / "snapshots"
    path = config(tmp_path, "sens", {"checkpointing": {"schedule": "multistage",
                                                        "snapshots_in_ram": 0,
                                                        "snapshots_on_disk": 3,
                                                        "directory": str(folder)}})
    cache = {**ENV, "MESHOPS_NO_MPI": "1", "MESHOPS_CACHE_DIR": str(tmp_path / "cache"),
             "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, str(ROOT / "run_model.py"), str(path), "--no-progress"]
    assert subprocess.run(command, env=cache, capture_output=True, timeout=600).returncode == 0
    (tmp_path / "sens.nc").unlink()

    def limited():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))
    out = subprocess.run(command, env=cache, capture_output=True, text=True, timeout=600,
                         preexec_fn=limited)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    lines = [line for line in out.stderr.splitlines() if line.startswith("run_model.py:")]
    assert len(lines) == 1, out.stderr
    for word in (f"sensitivity.checkpointing.directory = '{folder}'", f"{folder}/snapshots-rank0-",
                 ".npz (the state of step ", "no space left on device",
                 "its snapshots are removed"):
        assert word in lines[0], (word, lines[0])
    assert list(folder.iterdir()) == [] and not (tmp_path / "sens.nc").exists()


def test_observations_at_cells_the_mesh_lacks_stop_the_run(tmp_path):
    obs = tmp_path / "obs.nc"
    # cells given 0-based, written 1-based: 6 and 901
    write_observations(obs, np.array([5, 900]), np.array([0.0, 1800.0]), np.array([5000.0, 5000.0]),
                       np.array([1.0, 1.0]))
    path = config(tmp_path, "cells", {"cost": {"kind": "misfit", "observations": str(obs)}})
    out = run(path, ranks=2)
    assert out.returncode == 2
    assert f"{obs}: cell[1] = 901: expected a 1-based cell index in [1, 642]" in out.stderr


@pytest.mark.parametrize("ranks", [None, pytest.param(2, marks=pytest.mark.mpi)])
def test_a_missing_value_sentinel_is_used_only_where_the_file_marks_it(tmp_path, ranks):
    """Observations with h = -9999 m at random rows: unmarked, the run stops before the forward
    sweep with one line naming the file, the variable, the value, the observation and what was
    expected (nothing written); with `missing_value = -9999` those observations are left out (J and
    the gradients those of a file without them) and the log says how many."""
    from tests.swm.test_faults import error_of

    rng = np.random.default_rng()
    n = 40
    cells = rng.choice(642, n, replace=False)
    times = 1800.0 * rng.integers(0, 13, n)
    h = 5500 + 100 * rng.standard_normal(n)
    bad = np.sort(rng.choice(n, 3, replace=False))
    h[bad] = -9999.0
    results = {}
    for marked in (False, True):
        obs = tmp_path / f"obs_{marked}.nc"
        write_observations(obs, cells, times, h, np.full(n, 5.0))
        if marked:                   # the same values, -9999 declared missing
            with netCDF4.Dataset(obs, "a") as ds:
                ds["h"].missing_value = -9999.0
        path = config(tmp_path, f"sentinel_{marked}",
                      {"cost": {"kind": "misfit", "observations": str(obs)}, "plot": False})
        results[marked] = (obs, run(path, ranks=ranks))
    obs, out = results[False]
    assert out.returncode == 2
    assert error_of(out.stderr).endswith(
        f"{obs}: h[{bad[0]}] = -9999 m (cell {cells[bad[0]] + 1}, time {times[bad[0]]:g} s): "
        "expected a fluid thickness > 0 m; mark a missing observation with the variable's "
        "_FillValue or missing_value attribute")
    assert not (tmp_path / "sentinel_False.nc").exists()
    obs, out = results[True]
    assert out.returncode == 0, out.stderr
    assert f"{obs}: 3 of {n} observations left out of the cost as missing values (h: 3 " \
           "(missing_value = -9999.0))" in out.stderr
    keep = np.setdiff1d(np.arange(n), bad)           # the same run on the other observations
    write_observations(tmp_path / "kept_obs.nc", cells[keep], times[keep], h[keep], np.full(keep.size, 5.0))
    path = config(tmp_path, "kept", {"cost": {"kind": "misfit", "observations":
                                              str(tmp_path / "kept_obs.nc")}, "plot": False})
    assert run(path, ranks=ranks).returncode == 0
    (grads, value), (expected, expected_value) = (gradients(tmp_path / "sentinel_True.nc"),
                                                  gradients(tmp_path / "kept.nc"))
    assert value == expected_value and all(np.array_equal(grads[k], expected[k]) for k in grads)
    assert_gradient_units(tmp_path / "kept.nc", "1")


def test_observation_times_past_the_runs_end_are_refused_at_load(tmp_path):
    """A misfit file with an observation a random number of steps past the run's end (6 h): the
    config is refused before the mesh is built, naming the key, the file's time and the run's
    length; a 4D-Var observation time past the end likewise."""
    from tests.swm.test_faults import error_of

    rng = np.random.default_rng()
    obs = tmp_path / "obs.nc"
    times = 1800.0 * rng.integers(0, 13, 20)
    late = int(rng.integers(20))
    times[late] = 21600.0 + 1800.0 * int(rng.integers(1, 5))
    write_observations(obs, rng.choice(642, 20, replace=False), times, np.full(20, 5500.0),
                       np.ones(20))
    path = config(tmp_path, "late", {"cost": {"kind": "misfit", "observations": str(obs)}})
    out = run(path, "--check-adjoint")
    assert out.returncode == 2 and "mesh:" not in out.stderr
    assert error_of(out.stderr).splitlines()[1] == (
        f"  sensitivity.cost.observations = {str(obs)!r}: time[{late}] = {times[late]:g} s is after "
        "the end of the run's length time.days = 0.25 (6 h); expected observation times within "
        "[0, 21600] s")
    path = small(tmp_path, "twin", "fourdvar", observation_hours=[3, 6, 9])
    out = run_small(path)
    assert out.returncode == 2 and error_of(out.stderr).splitlines()[1] == (
        "  fourdvar.observation_hours[2] = 9.0: outside the run's length time.days = 0.25 (6 h); "
        "expected times within [0, 6] h")
    assert written(tmp_path) == {"obs.nc"}


def test_check_adjoint_needs_a_sensitivity_section(tmp_path):
    out = run(config(tmp_path, "plain", sensitivity=False), "--check-adjoint")
    assert out.returncode == 2 and "has no sensitivity section" in out.stderr


@pytest.mark.mpi
def test_fourdvar_twin_at_level_4_on_two_ranks(tmp_path):
    """The twin of configs/fourdvar_twin.yaml over half its window: the cost falls by more than
    1e3 within 50 iterations and the analysis is closer to the truth than the first guess."""
    tree = yaml.safe_load((ROOT / "configs" / "fourdvar_twin.yaml").read_text())
    tree["time"]["days"] = 0.5
    tree["fourdvar"].update(observation_hours=[6, 12], output=str(tmp_path / "twin.nc"))
    path = tmp_path / "twin.yaml"
    path.write_text(yaml.safe_dump(tree))
    out = run(path, ranks=2)
    assert out.returncode == 0, out.stderr
    with netCDF4.Dataset(tmp_path / "twin.nc") as ds:
        cost, h_error = ds["cost"][:], ds["h_rms_error"][:]
        iterations = int(ds["iteration"][-1])
    assert iterations <= 50
    assert cost[0] / cost[-1] > 1e3
    assert h_error[-1] < h_error[0]
    assert (tmp_path / "twin.png").stat().st_size > 10_000


@pytest.mark.gpu
def test_gradient_on_the_gpu_equals_numpy_and_passes_check_adjoint(tmp_path):
    pytest.importorskip("cupy")
    cpu = config(tmp_path, "cpu", {"plot": False, "adjoint_mode": "atomic"}, diffusion={"apvm": 0.5})
    gpu = config(tmp_path, "gpu", {"plot": False, "adjoint_mode": "atomic"}, diffusion={"apvm": 0.5},
                 backend="cupy")
    assert run(cpu).returncode == 0
    out = run(gpu)
    assert out.returncode == 0, out.stderr
    (g_cpu, j_cpu), (g_gpu, j_gpu) = gradients(tmp_path / "cpu.nc"), gradients(tmp_path / "gpu.nc")
    assert j_gpu == pytest.approx(j_cpu, rel=1e-12)
    for name in g_cpu:
        assert np.abs(g_gpu[name] - g_cpu[name]).max() <= 1e-10 * np.abs(g_cpu[name]).max(), name
    check = run(gpu, "--check-adjoint")
    assert check.returncode == 0, check.stdout + check.stderr


# -- the watchdog and the output checks of sensitivity and 4D-Var runs (level 2, short) -----------

def small(tmp_path, name, kind="sensitivity", days=0.25, dt=1800, **settings):
    """A level-2 case-5 config `name`.yaml whose every output lies in tmp_path: a sensitivity run
    (gradients to `name`.nc) or a 4D-Var twin (analysis to `name`.nc), `settings` merged into
    its section."""
    tree = {"mesh": {"generate": {"level": 2, "lloyd": 10}}, "case": {"name": "williamson5"},
            "time": {"days": days, "dt": dt}, "output": {"interval_hours": 6,
                                                         "path": str(tmp_path / f"{name}.history.nc")},
            "restart": {"path": str(tmp_path / f"{name}.restart.nc")}}
    if kind == "sensitivity":
        tree["sensitivity"] = {"cost": {"kind": "mean", "field": "h",
                                        "box": {"lat": [20, 50], "lon": [300, 340]}},
                               "checkpointing": {"schedule": "revolve", "snapshots_in_ram": 2},
                               "output": str(tmp_path / f"{name}.nc"), **settings}
    else:
        tree["fourdvar"] = {"observation_hours": [3, 6], "iterations": 3,
                            "output": str(tmp_path / f"{name}.nc"), **settings}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(tree))
    return path


def run_small(path, *extra):
    """run_model.py on one process, the mesh cache in the config's folder."""
    env = {**ENV, "MESHOPS_NO_MPI": "1", "MESHOPS_CACHE_DIR": str(path.parent / "cache")}
    return subprocess.run([sys.executable, str(ROOT / "run_model.py"), str(path), "--no-progress",
                           *extra], env=env, capture_output=True, text=True, timeout=600)


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("run_model.py:")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def written(tmp_path) -> set:
    """What a run left in tmp_path besides its config and the mesh cache."""
    return {p.name for p in tmp_path.iterdir() if p.name != "cache" and p.suffix != ".yaml"}


BLOWUP = dict(days=2, dt=21600)          # level 2: Courant number far above the limit by step 4


@pytest.mark.parametrize("kind, extra", [("sensitivity", ()), ("sensitivity", ("--check-adjoint",)),
                                         ("fourdvar", ())])
def test_a_run_that_blows_up_stops_on_the_watchdog_and_writes_nothing(tmp_path, kind, extra):
    settings = {"observation_hours": [48]} if kind == "fourdvar" else {}
    path = small(tmp_path, "blowup", kind, **BLOWUP, **settings)
    out = run_small(path, *extra)
    assert out.returncode == 3, out.stderr
    line = one_line(out.stderr)
    assert line.startswith("run_model.py: stopped: step ")
    assert "Courant number" in line or "not finite" in line
    assert "lat " in line and "lon " in line
    assert "RuntimeWarning" not in out.stderr        # the watchdog's line says what went wrong
    assert written(tmp_path) == set()                # no gradients, maps, observations or locks


def test_the_plain_forward_run_of_that_config_stops_too(tmp_path):
    path = small(tmp_path, "forward", "plain", **BLOWUP)
    tree = yaml.safe_load(path.read_text())
    del tree["fourdvar"]
    path.write_text(yaml.safe_dump(tree))
    out = run_small(path)
    assert out.returncode == 3 and "stopped: step " in one_line(out.stderr)


def test_a_sensitivity_run_writes_gradients_and_maps_marked_as_the_models(tmp_path):
    from framework.output import MODEL_NAME, png_written_by_model

    out = run_small(small(tmp_path, "sens"))
    assert out.returncode == 0, out.stderr
    with netCDF4.Dataset(tmp_path / "sens.nc") as ds:
        assert ds.model_name == MODEL_NAME
        assert all(np.isfinite(ds[name][:]).all() for name in ("dJdh0", "dJdu0", "dJdb", "J"))
        assert np.abs(ds["dJdh0"][:]).max() > 0
    maps = {f"sens.{name}.png" for name in ("dJdh0", "dJdu0", "dJdb")}
    assert written(tmp_path) == {"sens.nc"} | maps       # no lock, no temporary files left
    for name in maps:
        assert png_written_by_model(tmp_path / name)
        assert (tmp_path / name).stat().st_size > 10_000
        with PIL.Image.open(tmp_path / name) as image:               # still a valid PNG
            image.load()
            assert image.text["model_name"] == MODEL_NAME and image.size[0] > 500


def test_a_rerun_replaces_its_own_files(tmp_path):
    path = small(tmp_path, "again")
    assert run_small(path).returncode == 0
    first = gradients(tmp_path / "again.nc")
    stamp = (tmp_path / "again.nc").stat().st_mtime_ns
    out = run_small(path)
    assert out.returncode == 0, out.stderr
    second = gradients(tmp_path / "again.nc")
    assert (tmp_path / "again.nc").stat().st_mtime_ns != stamp
    assert second[1] == first[1] and all(np.array_equal(first[0][k], second[0][k]) for k in first[0])
    assert written(tmp_path) == {"again.nc", "again.dJdh0.png", "again.dJdu0.png", "again.dJdb.png"}


@pytest.mark.parametrize("victim, message", [
    ("refused.nc", "sensitivity.output = '{dir}/refused.nc': cannot be read as netCDF (*): "
                   "truncated or damaged (a copy cut short, a full disk), or a file this model did "
                   "not write; nothing was read or changed; expected an intact file of this model "
                   "there (its own files are written whole and then renamed), or another path"),
    ("refused.dJdu0.png", "sensitivity.output = '{dir}/refused.nc': its map "
                          "'{dir}/refused.dJdu0.png' is a file that this model did not write; "
                          "expected a new path (or remove the file) (no maps: sensitivity.plot: "
                          "false)"),
])
def test_a_file_the_model_did_not_write_is_refused_before_any_work(tmp_path, victim, message):
    (tmp_path / victim).write_bytes(b"hello")
    out = run_small(small(tmp_path, "refused"))
    assert out.returncode == 2
    before, _, after = ("run_model.py: error: " + message.format(dir=tmp_path)).partition("(*)")
    line = one_line(out.stderr)
    assert line == before + after if not after else (line.startswith(before) and line.endswith(after))
    assert "162 cells" not in out.stderr and not (tmp_path / "cache").exists()   # before setup
    assert (tmp_path / victim).read_bytes() == b"hello"
    assert written(tmp_path) == {victim}


def test_a_second_run_on_the_same_path_is_refused(tmp_path):
    import fcntl

    path = small(tmp_path, "busy")
    with open(tmp_path / "busy.nc.lock", "a+") as lock:      # another run holds the path
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        lock.write("pid 12345\n")
        lock.flush()
        out = run_small(path)
    assert out.returncode == 2
    assert "sensitivity.output = " in one_line(out.stderr) and "another run" in out.stderr
    assert not (tmp_path / "busy.nc").exists() and not (tmp_path / "cache").exists()


@pytest.mark.parametrize("victim", ["twin.nc", "twin.observations.nc", "twin.png"])
def test_fourdvar_files_the_model_did_not_write_are_refused(tmp_path, victim):
    (tmp_path / victim).write_bytes(b"hello")
    out = run_small(small(tmp_path, "twin", "fourdvar"))
    assert out.returncode == 2
    line = one_line(out.stderr)
    assert line.startswith(f"run_model.py: error: fourdvar.output = ") and victim in line
    assert "this model did not write" in line and not (tmp_path / "cache").exists()
    assert (tmp_path / victim).read_bytes() == b"hello"
    assert written(tmp_path) == {victim}


def test_a_fourdvar_twin_writes_marked_files_and_reruns(tmp_path):
    from framework.output import MODEL_NAME, png_written_by_model

    path = small(tmp_path, "twin", "fourdvar")
    for _ in range(2):                                # the rerun replaces its own files
        out = run_small(path)
        assert out.returncode == 0, out.stderr
        assert written(tmp_path) == {"twin.nc", "twin.observations.nc", "twin.png"}
        for name in ("twin.nc", "twin.observations.nc"):
            with netCDF4.Dataset(tmp_path / name) as ds:
                assert ds.model_name == MODEL_NAME
        assert png_written_by_model(tmp_path / "twin.png")
