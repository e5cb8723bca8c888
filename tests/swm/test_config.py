"""Config schema: every bad key stops the run before any work, naming the key, value and rule."""
import subprocess
import sys

import pytest
import yaml

from meshrun.config import ConfigError, describe_schema, dump, load_config
from swm.config import CFL_LIMIT

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]
GOOD = {"mesh": {"generate": {"level": 3}}, "case": {"name": "williamson5"},
        "time": {"days": 1, "dt": 1800}}


def write(tmp_path, tree):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(tree))
    return path


def test_defaults_filled_in(tmp_path):
    config = load_config(write(tmp_path, GOOD))
    assert config.backend == "numpy" and config.dtype == "float64" and config.partition.method == "metis"
    assert config.mesh.generate.lloyd == 0 and config.output.interval_hours == 24.0


@pytest.mark.parametrize("change, key, words", [
    ({"mesh": {"generate": {"level": -1}}}, "mesh.generate.level", "greater than or equal to 0"),
    ({"time": {"days": 1, "dt": 0}}, "time.dt", "greater than 0"),
    ({"time": {"days": 1, "dt": -5.0}}, "time.dt", "greater than 0"),
    ({"time": {"days": 1, "cfl": CFL_LIMIT + 0.1}}, "time.cfl", f"less than or equal to {CFL_LIMIT}"),
    ({"time": {"days": 1, "dt": 600, "cfl": 0.5}}, "time", "exactly one of time.dt"),
    ({"time": {"days": "two", "dt": 600}}, "time.days", "valid number"),
    ({"backend": "fortran"}, "backend", "'numpy' or 'cupy'"),
    ({"diffusion": {"visc4": -1.0}}, "diffusion.visc4", "greater than or equal to 0"),
    ({"mesh": {"file": "/nonexistent/x1.162.grid.nc"}}, "mesh", "no such file"),
    ({"colour": "blue"}, "colour", "unknown key (value 'blue'); expected one of: model, mesh, "),
    ({"output": {"path": "o.nc", "intervall_hours": 6}}, "output.intervall_hours",
     "unknown key (value 6); expected one of: path, interval_hours"),
    ({"output": {"variables": ["h", "temperature"]}}, "output.variables.1", "'h'"),
    ({"partition": {"method": "file"}}, "partition", "partition.file is needed"),
])
def test_bad_settings_name_key_value_and_rule(tmp_path, change, key, words):
    tree = {**GOOD, **change}
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, tree))
    message = str(err.value)
    assert str(tmp_path / "run.yaml") in message
    line = next(l for l in message.splitlines() if l.strip().startswith(key + ":") or
                l.strip().startswith(key + " ="))
    assert words in line, message


def test_set_overrides_and_print_config(tmp_path):
    path = write(tmp_path, GOOD)
    config = load_config(path, ["time.days=2.5", "diffusion.visc2=1.0e+5", "case.name=galewsky"])
    assert config.time.days == 2.5 and config.diffusion.visc2 == 1e5 and config.case.name == "galewsky"
    with pytest.raises(ConfigError, match="--set 'time': expected KEY.PATH=VALUE"):
        load_config(path, ["time"])
    out = subprocess.run([sys.executable, "run_model.py", str(path), "--print-config",
                          "--set", "time.days=3"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert yaml.safe_load(out.stdout) == yaml.safe_load(dump(load_config(path, ["time.days=3"])))


def test_bad_config_exits_before_work(tmp_path):
    path = write(tmp_path, {**GOOD, "time": {"days": 1, "dt": -1}})
    out = subprocess.run([sys.executable, str(ROOT / "run_model.py"), str(path)], cwd=tmp_path,
                         capture_output=True, text=True, env={**__import__("os").environ,
                                                              "PYTHONPATH": str(ROOT)})
    assert out.returncode == 2 and "time.dt = -1" in out.stderr and out.stdout == ""
    assert not list(tmp_path.glob("*.nc*"))


def test_every_key_is_documented():
    lines = describe_schema()
    assert any(l.startswith("time.cfl: float or none, default None; > 0 <= ") for l in lines), lines
    assert all(" -- " in l for l in lines if not l.endswith("section")), lines


def test_shipped_configs_are_valid():
    paths = sorted((ROOT / "configs").glob("*.yaml"))
    assert len(paths) >= 8
    for path in paths:
        config = load_config(path)
        assert config.time.dt is not None or config.time.cfl is not None, path


# --- strict loading: repeated keys, coerced scalars, non-finite floats -----------------------------

GOOD_TEXT = """\
mesh:
  generate: {level: 3}
case: {name: williamson5}
time:
  days: 1
  dt: 1800
"""


def write_text(tmp_path, text):
    path = tmp_path / "run.yaml"
    path.write_text(text)
    return path


def error_of(path, overrides=()):
    with pytest.raises(ConfigError) as err:
        load_config(path, overrides)
    return str(err.value)


def test_duplicate_key_top_level(tmp_path):
    path = write_text(tmp_path, GOOD_TEXT + "case: {name: galewsky}\n")
    assert error_of(path) == (f"{path}: line 7: duplicate key case (first at line 3); "
                              "expected each key once")


def test_duplicate_key_nested(tmp_path):
    path = write_text(tmp_path, GOOD_TEXT + "  dt: 1200\n")
    assert error_of(path) == (f"{path}: line 7: duplicate key time.dt (first at line 6); "
                              "expected each key once")
    path = write_text(tmp_path, "mesh:\n  generate: {level: 3, lloyd: 1, level: 4}\n"
                                "case: {name: williamson5}\ntime: {days: 1, dt: 1800}\n")
    assert f"{path}: line 2: duplicate key mesh.generate.level (first at line 2)" in error_of(path)


def test_duplicate_key_in_set_value(tmp_path):
    message = error_of(write(tmp_path, GOOD), ["time={days: 1, days: 2}"])
    assert message.startswith("--set 'time={days: 1, days: 2}': line 1: duplicate key time.days")


def test_merge_key_override_is_not_a_duplicate(tmp_path):
    path = write_text(tmp_path, GOOD_TEXT + "restart:\n  <<: {interval_hours: 6}\n  interval_hours: 12\n")
    assert load_config(path).restart.interval_hours == 12


@pytest.mark.parametrize("text, line", [
    ("mesh: {generate: {level: true}}", "mesh.generate.level = True: Input should be a valid integer, "
                                        "got a boolean"),
    ("mesh: {generate: {level: 3, lloyd: 2.5}}", "mesh.generate.lloyd = 2.5: Input should be a valid "
                                                 "integer, got a float"),
    ("mesh: {generate: {level: 3, lloyd: 2.0}}", "mesh.generate.lloyd = 2.0: Input should be a valid "
                                                 "integer, got a float"),
    ("mesh: {generate: {level: '3'}}", "mesh.generate.level = '3': Input should be a valid integer, "
                                       "got a string (write the number without quotes)"),
    ("time: {days: '2', dt: 1800}", "time.days = '2': Input should be a valid number, got a string "
                                    "(write the number without quotes)"),
    ("time: {days: 1, dt: '1200'}", "time.dt = '1200': Input should be a valid number, got a string "
                                    "(write the number without quotes)"),
    ("time: {days: 1, dt: true}", "time.dt = True: Input should be a valid number, got a boolean"),
    ("restart: {resume: 1}", "restart.resume = 1: Input should be a valid boolean, got an integer"),
    ("restart: {resume: 'yes'}", "restart.resume = 'yes': Input should be a valid boolean, got a string"),
    ("time: {days: 1, dt: .inf}", "time.dt = inf: Input should be a finite number (not .inf or .nan)"),
    ("time: {days: 1, dt: .nan}", "time.dt = nan: Input should be a finite number (not .inf or .nan)"),
    ("time: {days: .nan, dt: 1800}", "time.days = nan: Input should be a finite number"),
    ("time: {days: 1, cfl: .nan}", "time.cfl = nan: Input should be a finite number"),
    ("mesh: {generate: {level: 3}, radius: .inf}", "mesh.radius = inf: Input should be a finite number"),
    ("output: {interval_hours: .inf}", "output.interval_hours = inf: Input should be a finite number"),
    ("diffusion: {visc4: -.inf}", "diffusion.visc4 = -inf: Input should be a finite number"),
    ("case: {name: williamson2, alpha: .nan}", "case.alpha = nan: Input should be a finite number"),
    ("watchdog: {cfl_limit: .inf}", "watchdog.cfl_limit = inf: Input should be a finite number"),
])
def test_coerced_and_non_finite_scalars_are_refused(tmp_path, text, line):
    tree = {**GOOD, **yaml.safe_load(text)}
    path = write_text(tmp_path, yaml.safe_dump(tree))
    message = error_of(path)
    assert message.startswith(f"{path}: 1 invalid setting(s):\n"), message
    assert line in message, message


def test_yaml_lists_ints_and_exponents_still_read(tmp_path):
    path = write_text(tmp_path, GOOD_TEXT + """\
diffusion: {visc4: 1e14, visc2: 2.5e5}
sensitivity:
  cost: {kind: mean, box: {lat: [20, 50], lon: [300, 340]}, window_hours: [0, 12]}
  output: grad.nc
""")
    config = load_config(path)
    assert config.diffusion.visc4 == 1e14 and config.diffusion.visc2 == 2.5e5
    assert config.sensitivity.cost.box.lat == (20.0, 50.0)
    assert config.sensitivity.cost.window_hours == (0.0, 12.0)
    assert isinstance(config.time.days, float) and config.time.days == 1.0
    assert str(config.sensitivity.output) == "grad.nc"
    assert load_config(path, ["sensitivity.cost.box.lat=[-10, 10.5]"]).sensitivity.cost.box.lat == (-10, 10.5)


def test_set_overrides_typed_as_yaml(tmp_path):
    config = load_config(write(tmp_path, GOOD), ["time.days=0.5", "backend=cupy", "restart.resume=true",
                                                 "watchdog.interval_steps=5", "diffusion.visc4=1e14"])
    assert config.time.days == 0.5 and config.backend == "cupy" and config.restart.resume is True
    assert config.watchdog.interval_steps == 5 and config.diffusion.visc4 == 1e14
    assert "time.days = '2': Input should be a valid number" in error_of(write(tmp_path, GOOD),
                                                                          ["time.days='2'"])
    assert error_of(write(tmp_path, GOOD), ["time.dt=[1"]).startswith("--set 'time.dt=[1': not valid YAML")


# --- new keys -----------------------------------------------------------------------------------------

def test_max_steps_and_watchdog_defaults(tmp_path):
    config = load_config(write(tmp_path, GOOD))
    assert config.time.max_steps == 1_000_000
    assert config.watchdog.interval_steps == 10 and config.watchdog.cfl_limit == CFL_LIMIT
    lines = describe_schema()
    assert any(l.startswith("time.max_steps: int, default 1000000; >= 1 -- ") for l in lines), lines
    assert any(l.startswith("watchdog.interval_steps: int, default 10; >= 1 <= 100000 -- steps between")
               for l in lines), lines
    assert any(l.startswith(f"watchdog.cfl_limit: float, default {CFL_LIMIT!r}; > 0 -- ") for l in lines)


@pytest.mark.parametrize("change, line", [
    ({"time": {"days": 1, "dt": 1800, "max_steps": 0}}, "time.max_steps = 0: Input should be greater "
                                                        "than or equal to 1"),
    ({"watchdog": {"interval_steps": 0}}, "watchdog.interval_steps = 0: Input should be greater than "
                                          "or equal to 1"),
    ({"watchdog": {"interval_steps": 100001}}, "watchdog.interval_steps = 100001: Input should be less"),
    ({"watchdog": {"cfl_limit": 0}}, "watchdog.cfl_limit = 0: Input should be greater than 0"),
    ({"watchdog": {"every": 3}}, "watchdog.every: unknown key (value 3); expected one of: "
                                 "interval_steps, cfl_limit"),
    ({"time": {"days": 1, "cfl": 1.2}, "watchdog": {"cfl_limit": 1.0}},
     "time.cfl = 1.2 is above watchdog.cfl_limit = 1.0: the watchdog would stop the run"),
])
def test_new_keys_checked(tmp_path, change, line):
    path = write(tmp_path, {**GOOD, **change})
    message = error_of(path)
    assert message.startswith(f"{path}: 1 invalid setting(s):\n") and line in message, message


# --- consistency: resume, files that collide, output directories ----------------------------------------

SENSITIVITY = {"cost": {"kind": "mean"}}


@pytest.mark.parametrize("section, text", [
    ("sensitivity", "restart.resume: a sensitivity run starts from the case's initial state (its "
                    "gradient is dJ/dh0 of that state); remove restart.resume or the sensitivity "
                    "section"),
    ("fourdvar", "restart.resume: a 4D-Var run starts from the case's initial state"),
])
def test_resume_refused_with_sensitivity_or_fourdvar(tmp_path, section, text):
    path = write(tmp_path, {**GOOD, "restart": {"resume": True},
                            section: SENSITIVITY if section == "sensitivity" else {}})
    message = error_of(path)
    assert message.startswith(f"{path}: 1 invalid setting(s):\n  {text}"), message


def test_output_is_the_config_file(tmp_path):
    path = tmp_path / "run.yaml"
    write(tmp_path, {**GOOD, "output": {"path": str(path)}})
    assert error_of(path) == (f"{path}: 1 invalid setting(s):\n  output.path = {str(path)!r} is the "
                              "config file itself: a run never overwrites its inputs; expected another "
                              "path")


def test_output_is_the_mesh_file(tmp_path, monkeypatch):
    mesh = tmp_path / "x1.162.grid.nc"
    mesh.write_bytes((ROOT / "tests/data/x1.162.grid.nc").read_bytes())
    monkeypatch.chdir(tmp_path)                    # a relative output path is the same file
    tree = {**GOOD, "mesh": {"file": str(mesh)}, "output": {"path": "x1.162.grid.nc"}}
    message = error_of(write(tmp_path, tree))
    assert ("  output.path = 'x1.162.grid.nc' is the mesh file (mesh.file): a run never overwrites "
            "its inputs; expected another path") in message.splitlines(), message
    message = error_of(write(tmp_path, {**tree, "output": {}, "restart": {"path": "./x1.162.grid.nc"}}))
    assert "  restart.path = 'x1.162.grid.nc' is the mesh file (mesh.file)" in message, message


def test_output_is_the_restart_file(tmp_path):
    target = str(tmp_path / "a.nc")
    path = write(tmp_path, {**GOOD, "output": {"path": target}, "restart": {"path": target}})
    assert error_of(path) == (f"{path}: 1 invalid setting(s):\n  restart.path = {target!r} is the same "
                              f"file as output.path = {target!r}: one would overwrite the other; "
                              "expected another path")


def test_sensitivity_output_may_be_the_unwritten_output_path(tmp_path):
    """A sensitivity run writes no history: output.path is not among its files, so its gradient
    file may have that name."""
    target = str(tmp_path / "a.nc")
    config = load_config(write(tmp_path, {**GOOD, "output": {"path": target},
                                          "sensitivity": {**SENSITIVITY, "output": target}}))
    assert {f.key for f in config.written_files()} == {"sensitivity.output"}


def test_fourdvar_output_may_be_the_unwritten_restart_path(tmp_path):
    target = str(tmp_path / "a.nc")
    config = load_config(write(tmp_path, {**GOOD, "restart": {"path": target},
                                          "fourdvar": {"output": target}}))
    assert {f.key for f in config.written_files()} == {"fourdvar.output"}


def test_distinct_outputs_load(tmp_path):
    config = load_config(write(tmp_path, {**GOOD, "output": {"path": str(tmp_path / "o.nc")},
                                          "restart": {"path": str(tmp_path / "r.nc")},
                                          "sensitivity": {**SENSITIVITY,
                                                          "output": str(tmp_path / "s.nc")}}))
    assert config.sensitivity.output == tmp_path / "s.nc"


def test_missing_output_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, {**GOOD, "output": {"path": "nodir/w5.nc"}})
    assert error_of(path) == (f"{path}: 1 invalid setting(s):\n  output.path = 'nodir/w5.nc': "
                              "directory 'nodir' does not exist")
    path = write(tmp_path, {**GOOD, "restart": {"path": "gone/r.nc"},
                            "sensitivity": {**SENSITIVITY, "output": "nodir/s.nc"}})
    lines = error_of(path).splitlines()           # restart.path: not written by a sensitivity run
    assert lines[1:] == ["  sensitivity.output = 'nodir/s.nc': directory 'nodir' does not exist"], \
        lines


def test_output_parent_is_a_file(tmp_path):
    (tmp_path / "plain").write_text("not a directory")
    target = str(tmp_path / "plain" / "w5.nc")
    path = write(tmp_path, {**GOOD, "output": {"path": target}})
    assert error_of(path).splitlines()[1] == (f"  output.path = {target!r}: "
                                              f"{str(tmp_path / 'plain')!r} is not a directory")


def test_output_is_a_directory(tmp_path):
    path = write(tmp_path, {**GOOD, "fourdvar": {"output": str(tmp_path)}})
    assert error_of(path).splitlines()[1] == (f"  fourdvar.output = {str(tmp_path)!r}: is a "
                                              "directory; expected a regular file or a new path")


@pytest.mark.skipif(__import__("os").geteuid() == 0, reason="root writes anywhere")
def test_output_directory_not_writable(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        target = str(locked / "w5.nc")
        path = write(tmp_path, {**GOOD, "output": {"path": target}})
        assert error_of(path).splitlines()[1] == (f"  output.path = {target!r}: directory "
                                                  f"{str(locked)!r} is not writable")
    finally:
        locked.chmod(0o755)


def test_output_directory_not_writable_reported(tmp_path, monkeypatch):
    """The same check where the tests run as root (who may write anywhere): os.access says no."""
    import os
    locked = tmp_path / "locked"
    locked.mkdir()
    access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if str(p) == str(locked)
                        else access(p, mode, **kw))
    target = str(locked / "w5.nc")
    path = write(tmp_path, {**GOOD, "output": {"path": target}})
    assert error_of(path).splitlines()[1] == (f"  output.path = {target!r}: directory "
                                              f"{str(locked)!r} is not writable")
