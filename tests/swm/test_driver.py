"""run_model.py end to end on one process: output file, restart after a kill resumes bitwise,
watchdog stops with a message and keeps the last good state."""
import os
import signal
import subprocess
import sys
import time

import netCDF4
import numpy as np
import pytest
import yaml

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "MESHOPS_NO_MPI": "1"}


def write_config(tmp_path, name, tree, **sections):
    """`name`.yaml in tmp_path: `tree` with output to `name`.nc, restarts to `name`.restart.nc,
    and each section given merged into it (a top-level value such as backend set)."""
    tree = {**tree, "output": {**tree.get("output", {}), "path": str(tmp_path / f"{name}.nc")},
            "restart": {**tree.get("restart", {}), "path": str(tmp_path / f"{name}.restart.nc")}}
    for key, value in sections.items():
        tree[key] = {**tree.get(key, {}), **value} if isinstance(value, dict) else value
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(tree))
    return path


def config(tmp_path, name, **sections):
    """A level-3 Williamson-5 config: 2 days at dt 1800, output every 12 hours."""
    return write_config(tmp_path, name, {"mesh": {"generate": {"level": 3, "lloyd": 20}},
                                         "case": {"name": "williamson5"},
                                         "time": {"days": 2, "dt": 1800},
                                         "output": {"interval_hours": 12}}, **sections)


def run(path, *extra, check=True):
    return subprocess.run([sys.executable, str(ROOT / "run_model.py"), str(path), "--no-progress", *extra],
                          env=ENV, capture_output=True, text=True, check=check)


def fields(path):
    with netCDF4.Dataset(path) as ds:
        ds.set_auto_mask(False)
        return {name: ds[name][:] for name in ("h", "u", "vorticity", "xtime", "mass")}


def test_history_file_has_mpas_fields_and_diagnostics(tmp_path):
    path = config(tmp_path, "w5")
    out = run(path)
    assert "day 2.000: mass" in out.stderr and str(tmp_path / "w5.nc") in out.stderr
    f = fields(tmp_path / "w5.nc")
    assert f["h"].shape == (5, 642, 1) and f["u"].shape == (5, 1920, 1) and f["vorticity"].shape[1] == 1280
    assert b"".join(f["xtime"][4]).decode().strip() == "0000-01-03_00:00:00"
    np.testing.assert_allclose(f["mass"], f["mass"][0], rtol=1e-13)
    assert not (tmp_path / "w5.nc.partial").exists()


def test_restart_after_a_kill_ends_bitwise_as_the_uninterrupted_run(tmp_path):
    restart = {"interval_hours": 6}
    whole = config(tmp_path, "whole", time={"days": 3}, restart=restart)
    run(whole)
    cut = config(tmp_path, "cut", time={"days": 3}, restart=restart)
    proc = subprocess.Popen([sys.executable, str(ROOT / "run_model.py"), str(cut), "--no-progress"],
                            env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    restart_file = tmp_path / "cut.restart.nc"
    deadline = time.time() + 120
    while not restart_file.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert restart_file.exists() and proc.returncode == -signal.SIGKILL, "killed before a restart"
    assert not (tmp_path / "cut.nc").exists() and (tmp_path / "cut.nc.partial").exists()
    run(cut, "--set", "restart.resume=true")
    a, b = fields(tmp_path / "whole.nc"), fields(tmp_path / "cut.nc")
    for name in ("h", "u", "vorticity", "xtime"):
        assert np.array_equal(a[name], b[name]), name


def test_watchdog_names_step_place_and_keeps_the_last_good_state(tmp_path):
    # the first state's Courant number (3.24) passes the limit 3.5, step 2's (4.2) does not
    path = config(tmp_path, "fast", time={"days": 1, "dt": 10800},
                  watchdog={"interval_steps": 1, "cfl_limit": 3.5})
    out = run(path, check=False)
    assert out.returncode == 3, out.stderr
    line = next(l for l in out.stderr.splitlines() if "stopped" in l)
    assert "step 2: Courant number" in line and "at edge" in line and "lat" in line and "above the limit" in line
    f = fields(tmp_path / "fast.nc")
    assert np.isfinite(f["h"]).all() and f["h"].shape[0] == 2      # time 0 and the kept step 1
    with netCDF4.Dataset(tmp_path / "fast.restart.nc") as ds:
        assert int(ds.step) == 1                                   # the last checked state


def test_plot_writes_maps(tmp_path):
    from swm.plot import main

    path = config(tmp_path, "w2", case={"name": "williamson2", "alpha": 0.3}, time={"days": 1})
    run(path, "--plot")
    assert main([str(tmp_path / "w2.nc"), "--out", str(tmp_path)]) == 0
    for name in ("h", "vorticity", "h_error"):
        png = tmp_path / f"w2.{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20000, name


def test_large_meshes_are_drawn_as_rasters_of_their_cells(tmp_path, monkeypatch, rng):
    """Above RASTER_CELLS cells a map is a raster whose every pixel shows the cell whose Voronoi
    region holds its centre (the nearest cell centre, checked by brute force on random pixels)."""
    from framework import plot
    from swm.plot import main

    path = config(tmp_path, "w5", time={"days": 0.5})
    run(path)
    with netCDF4.Dataset(tmp_path / "w5.nc") as ds:
        index = plot.cell_raster(ds, width=360)
        lon, lat = ds["lonCell"][:], ds["latCell"][:]
    centres = np.column_stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)])
    for row, col in zip(rng.integers(0, 180, 50), rng.integers(0, 360, 50)):
        plon, plat = np.radians(-179.5 + col), np.radians(-89.5 + row)
        p = np.array([np.cos(plat) * np.cos(plon), np.cos(plat) * np.sin(plon), np.sin(plat)])
        distance = np.linalg.norm(centres - p, axis=1)
        assert distance[index[row, col]] == distance.min()
    assert set(np.unique(index)) == set(range(len(lon)))   # at 1 degree every level-3 cell shows
    monkeypatch.setattr(plot, "RASTER_CELLS", 0)
    assert main([str(tmp_path / "w5.nc"), "--out", str(tmp_path)]) == 0
    for name in ("h", "vorticity"):
        png = tmp_path / f"w5.{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20000, name


@pytest.mark.mpi
def test_run_model_under_mpiexec_writes_the_one_process_history(tmp_path):
    from tests.test_mpi_ranks import _mpiexec

    path = config(tmp_path, "one", time={"days": 1})
    run(path)
    ranks = config(tmp_path, "two", time={"days": 1})
    env = {k: v for k, v in ENV.items() if k != "MESHOPS_NO_MPI"}
    out = subprocess.run([_mpiexec(), "-n", "2", sys.executable, str(ROOT / "run_model.py"), str(ranks),
                          "--no-progress"], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "2 ranks" in out.stderr
    a, b = fields(tmp_path / "one.nc"), fields(tmp_path / "two.nc")
    for name in ("h", "u", "vorticity"):
        assert np.array_equal(a[name], b[name]), name
