"""Config schema: every bad key stops the run before any work, naming the key, value and rule."""
import subprocess
import sys

import pytest
import yaml

from swm.config import CFL_LIMIT, ConfigError, describe_schema, dump, load_config

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
    ({"colour": "blue"}, "colour", "unknown key (value 'blue'); expected one of: mesh, "),
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
