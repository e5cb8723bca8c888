"""Each model's map command draws only its own core's files, so no command replaces the PNGs that
another core's run drew under the same names: `python -m swm.plot` on a gradient file (or a
history) of the hydrostatic core stops in one line naming `python -m hydrostatic.plot`, its
PNGs (STEM.dJdu0.png, ...) byte for byte as they were; `python -m hydrostatic.plot` draws the
gradient file's maps itself; and the hydrostatic history's day maps are not written over a PNG
that this model did not write."""
import subprocess
import sys

import yaml

from tests.hydrostatic.test_run import config as history_config
from tests.hydrostatic.test_sensitivity import SENSITIVITY
from tests.swm.test_faults import env, ok, run_model, snapshot


def plot(module, *args, cache):
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], env=env(cache),
                          capture_output=True, text=True, timeout=300)


def one_line(out) -> str:
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    return lines[0]


def test_swm_plot_refuses_the_hydrostatic_cores_files_and_keeps_their_pngs(tmp_path):
    tree = {"model": "hydrostatic", "mesh": {"generate": {"level": 2, "lloyd": 20}},
            "case": {"name": "jw06_baroclinic"}, "time": {"days": 0.125, "dt": 1800},
            "diffusion": {"visc4": 1.0e17},
            "output": {"path": str(tmp_path / "grad.history.nc"), "interval_hours": 1.5},
            "sensitivity": {**SENSITIVITY, "controls": ["theta", "u"],
                            "output": str(tmp_path / "grad.nc")}}
    path = tmp_path / "grad.yaml"
    path.write_text(yaml.safe_dump(tree))
    cache = tmp_path / "cache"
    ok(run_model(path, cache=cache))
    pngs = sorted(tmp_path.glob("grad.*.png"))
    names = {p.name for p in pngs}
    assert {"grad.dJdu0.png", "grad.dJdtheta0.png", "grad.dJdtheta0.section.png"} <= names
    before = snapshot(*pngs)

    line = one_line(plot("swm.plot", tmp_path / "grad.nc", cache=cache))
    assert "the hydrostatic core" in line and "core_name = 'atmosphere'" in line, line
    assert f"python -m hydrostatic.plot {tmp_path / 'grad.nc'}" in line, line
    assert snapshot(*pngs) == before and sorted(tmp_path.glob("grad.*.png")) == pngs

    out = plot("hydrostatic.plot", tmp_path / "grad.nc", cache=cache)     # its own command
    assert out.returncode == 0, out.stderr
    assert {f"wrote {tmp_path / name}" for name in names} == set(out.stdout.splitlines())

    ok(run_model(history_config(tmp_path, "hist", time={"days": 1 / 48}), cache=cache))
    line = one_line(plot("swm.plot", tmp_path / "hist.nc", cache=cache))
    assert "python -m hydrostatic.plot" in line, line
    assert not list(tmp_path.glob("hist.*.png"))

    foreign = tmp_path / "hist.surface_pressure.day0.0208333.png"      # not this model's
    foreign.write_bytes(b"a user's picture")
    line = one_line(plot("hydrostatic.plot", tmp_path / "hist.nc", cache=cache))
    assert str(foreign) in line, line
    assert foreign.read_bytes() == b"a user's picture"
    assert not (tmp_path / "hist.temperature_850hPa.day0.0208333.png").exists()
