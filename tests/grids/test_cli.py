"""`python -m grids`: generate, check and reorder, run as a user runs them (a subprocess)."""
import os
import pathlib
import shutil
import subprocess
import sys

import netCDF4
import numpy as np

from grids import read_mesh, validate_mesh

ROOT = pathlib.Path(__file__).resolve().parents[2]


def run(*args, cwd):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "grids", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_generate_then_check(tmp_path):
    radius = float(np.random.default_rng().uniform(1e6, 1e7))
    done = run("generate", "--level", 2, "--lloyd", 3, "-o", "x1.162.nc", "--radius", radius,
               "--format", "NETCDF4", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "x1.162.nc" in done.stdout and "nCells 162" in done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x1.162.nc"]
    with netCDF4.Dataset(tmp_path / "x1.162.nc") as ds:
        assert ds.data_model == "NETCDF4" and ds.sphere_radius == radius
    mesh = read_mesh(tmp_path / "x1.162.nc")
    validate_mesh(mesh)
    checked = run("check", "x1.162.nc", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    out = checked.stdout
    for text in ("nCells 162", "nEdges 480", "nVertices 320", "maxEdges 6", "cellQuality_min"):
        assert text in out, out
    assert out.strip().splitlines()[-1] == "valid"
    lo = mesh.dcEdge.min() / 1e3
    assert f"dcEdge min {lo:.4g} km" in out


def test_check_reports_a_corrupted_file(x1_162_path, tmp_path):
    bad = tmp_path / "bad.nc"
    shutil.copy(x1_162_path, bad)
    c = int(np.random.default_rng().integers(162))
    with netCDF4.Dataset(bad, "r+") as ds:
        ds["areaCell"][c] = -ds["areaCell"][c]
    done = run("check", bad, "--radius", 6371229.0, cwd=tmp_path)
    assert done.returncode == 1
    assert "invalid" in done.stdout and f"areaCell[{c}]" in done.stdout and str(bad) in done.stdout
    assert "expected a positive area" in done.stdout and "Traceback" not in done.stderr
    junk = tmp_path / "junk.nc"
    junk.write_bytes(b"not a netCDF file")
    done = run("check", junk, cwd=tmp_path)
    assert done.returncode == 1 and "junk.nc" in done.stdout and "Traceback" not in done.stderr


def test_check_the_real_file_and_reorder(x1_162_path, tmp_path):
    done = run("check", x1_162_path, cwd=tmp_path)
    assert done.returncode == 0 and "unit-sphere file" in done.stdout
    done = run("reorder", x1_162_path, "out.nc", "--method", "hilbert", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "indexToCellID" in done.stdout
    old, new = read_mesh(x1_162_path), read_mesh(tmp_path / "out.nc")
    validate_mesh(new)
    cells = new.extra["indexToCellID"][1] - 1
    edges = new.extra["indexToEdgeID"][1] - 1
    assert np.array_equal(np.sort(cells), np.arange(162))
    assert not np.array_equal(cells, np.arange(162))
    assert np.array_equal(new.xCell, old.xCell[cells])
    assert np.array_equal(new.dvEdge, old.dvEdge[edges])
