"""Config and command-line faults of run_model.py, each made for real in a subprocess: YAML 1.1
scalars (1:30, 010, yes), numbers too large for a float, a repeated output variable, a key of
another case, a run shorter than one step, time-step refusals before any mesh is made, ranks that
resolve different configs, and a first state above the watchdog's Courant limit.

Every refusal is one `run_model.py: ...` line (`tests.swm.test_faults.error_of`) naming the key,
the value and what is expected, with nothing written (not even a cached mesh)."""
import random
import subprocess
import sys
import time

import pytest
import yaml

from tests.swm.test_faults import (RUN_MODEL, TIMEOUT_S, env, error_of, leftovers, make_config, ok,
                                   refused, run_model)


def nothing_made(tmp_path, name="x"):
    """No output, no lock, no cached mesh."""
    assert not (tmp_path / f"{name}.nc").exists() and not (tmp_path / f"{name}.restart.nc").exists()
    assert leftovers(tmp_path, name) == []
    cache = tmp_path / "cache"
    assert not cache.exists() or not any(cache.iterdir())


def printed(out) -> dict:
    ok(out)
    return yaml.safe_load(out.stdout)


# -- 1. YAML 1.1 scalars -----------------------------------------------------------------------------

@pytest.mark.parametrize("where", ["file", "--set"])
def test_a_base_60_number_is_refused_not_read_as_minutes(tmp_path, where):
    hours, minutes = random.randint(1, 5), random.choice([15, 30, 45])
    text = f"{hours}:{minutes:02d}"
    path = make_config(tmp_path, "x", output={})
    extra = ()
    if where == "file":
        text_lines = path.read_text().replace("interval_hours: 24", f"interval_hours: {text}")
        path.write_text(text_lines)
    else:
        extra = ("--set", f"output.interval_hours={text}")
    line = refused(run_model(path, *extra), 2, f"output.interval_hours = '{text}'",
                   "expected a finite number > 0", "no base-60 numbers")
    assert str(hours * 60 + minutes) not in line
    nothing_made(tmp_path)


@pytest.mark.parametrize("where", ["file", "--set"])
def test_a_leading_zero_is_decimal_not_octal(tmp_path, where):
    hours = random.choice([10, 12])                      # YAML 1.1: 010 = 8, 012 = 10
    path = make_config(tmp_path, "x", time={"days": 5, "dt": 3600})
    extra = ["--print-config"]
    if where == "file":
        path.write_text(path.read_text().replace("interval_hours: 24", f"interval_hours: 0{hours}"))
    else:
        extra += ["--set", f"output.interval_hours=0{hours}"]
    assert printed(run_model(path, *extra))["output"]["interval_hours"] == hours


@pytest.mark.parametrize("word", ["yes", "no", "on", "off"])
def test_yes_no_on_off_are_not_booleans(tmp_path, word):
    path = make_config(tmp_path, "x")
    refused(run_model(path, "--set", f"restart.resume={word}"), 2,
            f"restart.resume = '{word}'", "expected true or false")
    nothing_made(tmp_path)


# -- 2. numbers too large for a float, infinities ----------------------------------------------------

@pytest.mark.parametrize("key, value, where, words", [
    ("time.days", "1e400", "file", ["line", "time.days = 1e400", "too large for a float",
                                    "expected a finite number > 0 and <= 3650"]),
    ("time.dt", "1e999", "--set", ["time.dt = 1e999", "too large for a float", "> 0"]),
    ("time.days", ".inf", "file", ["time.days = inf", "finite number > 0 and <= 3650"]),
    ("output.interval_hours", "1e308", "--set", ["output.interval_hours = 1e+308", "less than or equal to 87600"]),
    ("restart.interval_hours", "1e307", "--set", ["restart.interval_hours = 1e+307", "less than or equal to 87600"]),
])
def test_an_infinite_or_overflowing_number_is_one_line(tmp_path, key, value, where, words):
    path = make_config(tmp_path, "x")
    extra = ()
    if where == "file":
        section, name = key.split(".")
        text = path.read_text()
        assert f"  {name}: 1\n" in text
        path.write_text(text.replace(f"  {name}: 1\n", f"  {name}: {value}\n"))
    else:
        extra = ("--set", f"{key}={value}")
    out = run_model(path, *extra)
    line = refused(out, 2, *words)
    assert "Overflow" not in out.stderr and "--debug" not in line
    nothing_made(tmp_path)


# -- 3. a repeated output variable ---------------------------------------------------------------------

def test_a_repeated_output_variable_is_refused(tmp_path):
    names = random.sample(["h", "u", "vorticity", "pv_vertex", "ke"], 3)
    twice = random.choice(names)
    path = make_config(tmp_path, "x", output={"variables": names + [twice]})
    refused(run_model(path), 2, "output.variables", f"{twice!r} is given twice",
            "expected each name once")
    nothing_made(tmp_path)


# -- 4. a key of another case ------------------------------------------------------------------------

@pytest.mark.parametrize("case, key, user", [
    ("williamson6", "alpha", "williamson2"), ("williamson5", "alpha", "williamson2"),
    ("galewsky", "alpha", "williamson2"), ("williamson5", "perturbed", "galewsky"),
    ("williamson2", "perturbed", "galewsky")])
def test_a_key_of_another_case_is_refused(tmp_path, case, key, user):
    value = round(random.uniform(0.1, 1.5), 3) if key == "alpha" else random.choice([True, False])
    path = make_config(tmp_path, "x", case={"name": case, key: value})
    refused(run_model(path), 2, f"case.{key} = {value!r}", f"only case {user} uses it",
            f"not {case}", f"case.name = {case}")
    nothing_made(tmp_path)


def test_the_case_that_uses_the_key_takes_it(tmp_path):
    alpha = round(random.uniform(0.1, 1.5), 3)
    path = make_config(tmp_path, "x", case={"name": "williamson2", "alpha": alpha})
    assert printed(run_model(path, "--print-config"))["case"]["alpha"] == alpha


# -- 5. and 6. time-step refusals before any mesh ------------------------------------------------------

def test_a_run_shorter_than_one_step_is_refused(tmp_path):
    days = 3600 / 86400 * random.uniform(1e-12, 0.4)
    path = make_config(tmp_path, "x", time={"days": days})
    refused(run_model(path), 2, f"time.days = {days}", "shorter than one time step",
            "dt = 3600 s", "expected at least one step")
    nothing_made(tmp_path)


@pytest.mark.parametrize("time_section, words", [
    ({"days": 1.01, "dt": 3600}, ["time.days = 1.01", "multiple of the time step 3600"]),
    ({"days": 1, "dt": 7000}, ["time.dt = 7000", "divisor of output.interval_hours"]),
    ({"days": 2, "dt": 3600, "max_steps": 47}, ["48 steps", "time.max_steps = 47"]),
    ({"days": 30, "dt": None, "cfl": 1.0, "max_steps": 1000},
     ["time.cfl = 1.0 on a level-11 mesh", "at least", "time.max_steps = 1000"]),
])
def test_time_step_refusals_come_before_a_level_11_mesh(tmp_path, time_section, words):
    path = make_config(tmp_path, "x", mesh={"generate": {"level": 11}}, time=time_section)
    t0 = time.monotonic()
    out = run_model(path)
    refused(out, 2, *words)
    assert time.monotonic() - t0 < 60 and "mesh and initial state" not in out.stderr
    nothing_made(tmp_path)


def test_a_unit_sphere_cfl_run_is_refused_before_its_mesh(tmp_path):
    path = make_config(tmp_path, "x", mesh={"generate": {"level": 8}, "radius": 1.0},
                       time={"dt": None, "cfl": round(random.uniform(0.2, 1.4), 2)})
    refused(run_model(path), 2, "time.cfl", "level-8", "mesh.radius = 1", "expected dt >= 0.001")
    nothing_made(tmp_path)


# -- 7. every rank agrees on the config, errors once -----------------------------------------------------

def mpmd(first: list, second: list, cache):
    """run_model.py as rank 0 with arguments `first`, rank 1 with `second` (mpiexec MPMD)."""
    from tests.test_mpi_ranks import _mpiexec

    rank = [sys.executable, str(RUN_MODEL)]
    args = [_mpiexec(), "-n", "1", *rank, *first, "--no-progress",
            ":", "-n", "1", *rank, *second, "--no-progress"]
    return subprocess.run(args, env=env(cache, 2), capture_output=True, text=True, timeout=120)


@pytest.mark.mpi
def test_a_config_error_under_mpiexec_is_printed_once_before_any_log(tmp_path):
    path = make_config(tmp_path, "x", time={"days": 1, "dt": 3600, "dtt": 5})
    out = run_model(path, ranks=2)
    line = refused(out, 2, "time.dtt", "unknown key")
    assert out.stderr.index(line) == 0 and " rank 0: " not in out.stderr, out.stderr
    nothing_made(tmp_path)


@pytest.mark.mpi
@pytest.mark.parametrize("key, values", [
    ("output.interval_hours", (12.0, 24.0)),
    ("diffusion.visc2", (round(random.uniform(1e4, 1e5)), 0.0))])
def test_ranks_with_different_configs_end_with_one_line(tmp_path, key, values):
    path = str(make_config(tmp_path, "x"))
    out = mpmd([path, "--set", f"{key}={values[0]}"], [path], tmp_path / "cache")
    refused(out, 2, "the ranks resolved different configs", f"{key} = {float(values[0])!r} on rank 0",
            f"{float(values[1])!r} on rank 1", "expected one config on every rank")
    nothing_made(tmp_path)


@pytest.mark.mpi
def test_a_config_file_missing_on_one_rank_ends_with_one_line(tmp_path):
    path = make_config(tmp_path, "x")
    missing = tmp_path / f"gone{random.randint(0, 999)}.yaml"
    out = mpmd([str(path)], [str(missing)], tmp_path / "cache")
    refused(out, 2, "rank 1", str(missing), "No such file")
    nothing_made(tmp_path)


# -- 8. the watchdog checks the first state ---------------------------------------------------------------

@pytest.mark.parametrize("ranks", [1, pytest.param(2, marks=pytest.mark.mpi)])
def test_a_first_state_above_the_courant_limit_stops_before_the_first_step(tmp_path, ranks):
    # level 2: dt 10800 s starts at Courant number 1.56 (configs/williamson5.yaml, level 4 with
    # dt 3600 s: 2.22); a random limit below it
    limit = round(random.uniform(1.0, 1.5), 3)
    path = make_config(tmp_path, "x", time={"days": 2, "dt": 10800}, watchdog={"cfl_limit": limit})
    out = run_model(path, ranks=ranks)
    line = refused(out, 3, "stopped: step 0: Courant number", f"above the limit {limit}",
                   "watchdog.cfl_limit", "the initial state", "time.dt = 10800",
                   "expected a smaller time.dt")
    assert float(line.split("Courant number ")[1].split()[0]) > limit
    assert "nan" not in line and "ready to step" not in out.stderr
    assert not (tmp_path / "x.nc").exists() and not (tmp_path / "x.nc.partial").exists()
    assert leftovers(tmp_path, "x") == []
