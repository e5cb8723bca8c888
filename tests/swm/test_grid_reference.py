"""History and gradient files that reference their MPAS grid file (`output.mesh`), from runs of
run_model.py on generated meshes and on the real x1.162 mesh: what they hold and reference, how
UXarray, xarray (`framework.mesh_files.open_history`) and `python -m swm.plot` read them, the named
error for a missing or foreign grid file, `auto` choosing by size, resumes and ranks."""
import os
import pathlib
import shutil
import subprocess
import sys

import netCDF4
import numpy as np
import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
MESH_162 = ROOT / "tests" / "data" / "x1.162.grid.nc"
EARTH = 6371229.0


def environment(cache) -> dict:
    return {**os.environ, "MESHOPS_CACHE_DIR": str(cache), "MESHOPS_NO_MPI": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def write_config(directory, name, *, level=3, days=0.25, form="reference", **sections):
    tree = {"mesh": {"generate": {"level": level, "lloyd": 0}}, "case": {"name": "williamson5"},
            "time": {"days": days, "dt": 1800},
            "output": {"path": str(directory / f"{name}.nc"), "interval_hours": 3, "mesh": form},
            "restart": {"path": str(directory / f"{name}.restart.nc"), "interval_hours": 6}}
    tree.update(sections)
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(tree))
    return path


def run(env, *args, mpiexec=None):
    command = [sys.executable, *map(str, args)]
    if mpiexec is not None:
        command = mpiexec + command
        env = {k: v for k, v in env.items() if k != "MESHOPS_NO_MPI"}
    out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert "Traceback" not in out.stderr, out.stderr
    return out


def run_model(env, config, *extra):
    out = run(env, ROOT / "run_model.py", config, "--no-progress", *extra)
    assert out.returncode == 0, out.stderr
    return out


def attributes(path) -> dict:
    with netCDF4.Dataset(path) as ds:
        return {k: ds.getncattr(k) for k in ds.ncattrs()}


def variables(path) -> set:
    with netCDF4.Dataset(path) as ds:
        return set(ds.variables)


def fields(path) -> dict:
    with netCDF4.Dataset(path) as ds:
        ds.set_auto_mask(False)
        return {name: ds[name][:] for name in ("h", "u", "vorticity", "mass", "Time")}


@pytest.fixture(scope="module")
def referenced(tmp_path_factory):
    """A level-4 Williamson 5 run with output.mesh = reference: (history, grid file, env)."""
    tmp = tmp_path_factory.mktemp("referenced")
    env = environment(tmp / "cache")
    run_model(env, write_config(tmp, "w5", level=4))
    grids = list((tmp / "cache").glob("icos_l4_*.grid.nc"))
    assert len(grids) == 1
    return tmp / "w5.nc", grids[0], env


def test_a_referencing_history_holds_fields_and_names_its_grid(referenced):
    from framework.mesh_files import REFERENCE_ATTRIBUTES

    path, grid, _ = referenced
    attrs, grid_attrs = attributes(path), attributes(grid)
    assert attrs["mesh_file"] == str(grid.resolve())
    assert attrs["mesh_file_relative"] == os.path.relpath(grid, path.parent)
    assert set(REFERENCE_ATTRIBUTES) <= set(attrs)
    # MPAS lineage: a file_id of its own, the grid's file_id as parent_id
    assert attrs["parent_id"].splitlines()[0] == grid_attrs["file_id"] != attrs["file_id"]
    assert attrs["Conventions"] == "MPAS" and attrs["sphere_radius"] == EARTH
    held = variables(path)
    assert {"h", "u", "vorticity", "h_s", "xtime", "Time", "mass", "latCell", "lonCell"} <= held
    assert not held & {"xCell", "cellsOnEdge", "edgesOnCell", "areaCell", "verticesOnCell"}
    # the fields without the mesh: a fraction of the grid file
    assert path.stat().st_size < grid.stat().st_size / 2


def test_uxarray_and_open_history_read_it_with_the_grid(referenced):
    import uxarray

    from framework.mesh_files import history_mesh, open_history, stored_fingerprint

    path, grid, _ = referenced
    uxds = uxarray.open_dataset(grid, path)
    assert uxds.uxgrid.validate() and uxds["h"].sizes["n_face"] == uxds.uxgrid.n_face
    assert uxds["u"].sizes["n_edge"] == uxds.uxgrid.n_edge
    with open_history(path) as ds:
        assert ds.sizes["Time"] == 3 and ds["areaCell"].sizes == {"nCells": 2562}
        area = float(ds["areaCell"].sum())
        np.testing.assert_allclose(area, 4 * np.pi * EARTH ** 2, rtol=1e-12)
        mean_h = uxds["h"].isel(nVertLevels=0).weighted_mean().values
        np.testing.assert_allclose(mean_h * area, ds["mass"].values, rtol=1e-13)
        with netCDF4.Dataset(grid) as mesh:
            assert np.array_equal(ds["cellsOnEdge"].values, mesh["cellsOnEdge"][:])
    mesh = history_mesh(path)
    assert mesh.nCells == 2562 and stored_fingerprint(mesh) == attributes(path)["mesh_file_fingerprint"]


def test_a_missing_or_foreign_grid_is_a_named_error(referenced, tmp_path):
    from grids.cache import cached_icosahedral
    from grids.mpas_io import write_mesh
    from framework.mesh_files import MeshReferenceError, open_history

    path, grid, env = referenced
    moved = tmp_path / "w5.nc"
    shutil.copyfile(path, moved)
    with open_history(moved) as ds:                     # the absolute path still finds it
        assert ds.sizes["nEdges"] == 1920 * 4
    other = tmp_path / "l3.grid.nc"
    write_mesh(cached_icosahedral(3, lloyd_iterations=int(np.random.default_rng().integers(1, 4)),
                                  cache_dir=tmp_path / "cache"), other)
    with pytest.raises(MeshReferenceError) as err:
        open_history(moved, grid=other)
    assert str(moved) in str(err.value) and str(other) in str(err.value)
    assert "holds another mesh" in str(err.value)
    hidden = grid.with_name(grid.name + ".away")
    grid.rename(hidden)
    try:
        with pytest.raises(MeshReferenceError) as err:
            open_history(moved)
        assert str(moved) in str(err.value) and f"{grid} does not exist" in str(err.value)
        out = run(env, "-m", "swm.plot", moved, "--out", tmp_path)
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert str(grid) in out.stderr and "does not exist" in out.stderr
        out = run(env, "-m", "swm.plot", moved, "--out", tmp_path, "--grid", hidden)
        assert out.returncode == 0 and "w5.vorticity.png" in out.stdout, out.stderr
    finally:
        hidden.rename(grid)


def test_plot_draws_the_referencing_history_as_the_inside_one(referenced, tmp_path):
    from swm.plot import plot_file

    path, grid, env = referenced
    inside = write_config(tmp_path, "inside", level=4, form="inside")
    run_model(env, inside)
    a, b = fields(path), fields(tmp_path / "inside.nc")
    for name in a:
        assert np.array_equal(a[name], b[name]), name
    assert {"areaCell", "cellsOnEdge"} <= variables(tmp_path / "inside.nc")
    saved = (tmp_path / "inside.nc").stat().st_size - path.stat().st_size
    assert saved > 0.9 * grid.stat().st_size                 # the mesh is not copied
    for target, source in ((tmp_path / "ref", path), (tmp_path / "in", tmp_path / "inside.nc")):
        target.mkdir()
        written = plot_file(source, out_dir=target)
        assert [p.name.split(".", 1)[1] for p in written] == ["h.png", "vorticity.png"]
        assert all(p.stat().st_size > 20000 for p in written)


def test_auto_references_above_the_threshold(tmp_path, monkeypatch):
    import framework.mesh_files
    from grids.cache import cached_icosahedral
    from framework.config import MESH_INSIDE_MAX_CELLS
    from swm.config import load_config
    from framework.driver import grid_reference

    assert 10 * 4 ** 6 + 2 <= MESH_INSIDE_MAX_CELLS < 10 * 4 ** 7 + 2   # level 6 inside, 7 referenced
    assert framework.mesh_files.mesh_form("auto", MESH_INSIDE_MAX_CELLS) == "inside"
    assert framework.mesh_files.mesh_form("auto", MESH_INSIDE_MAX_CELLS + 1) == "reference"
    assert framework.mesh_files.mesh_form("inside", 10 ** 9) == "inside"
    monkeypatch.setenv("MESHOPS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(framework.mesh_files, "MESH_INSIDE_MAX_CELLS", 162)
    for level, form in ((2, "inside"), (3, "reference")):
        config = load_config(write_config(tmp_path, f"l{level}", level=level, form="auto"))
        mesh = cached_icosahedral(level, cache_dir=tmp_path / "cache")
        grid = grid_reference(config, mesh, config.output.path, "output.path")
        assert (grid is not None) == (form == "reference"), level
    assert grid.path.parent == tmp_path / "cache" and grid.fingerprint == \
        framework.mesh_files.stored_fingerprint(mesh)


def test_a_resumed_history_keeps_referencing_and_ends_as_the_uninterrupted_run(tmp_path):
    env = environment(tmp_path / "cache")
    whole = write_config(tmp_path, "whole", days=0.5)
    run_model(env, whole)
    parts = write_config(tmp_path, "parts", days=0.25)
    run_model(env, parts)
    run_model(env, parts, "--set", "restart.resume=true", "--set", "time.days=0.5")
    a, b = fields(tmp_path / "whole.nc"), fields(tmp_path / "parts.nc")
    for name in a:
        assert np.array_equal(a[name], b[name]), name
    assert attributes(tmp_path / "parts.nc")["mesh_file"] == attributes(tmp_path / "whole.nc")["mesh_file"]
    assert "areaCell" not in variables(tmp_path / "parts.nc")


def test_without_a_writable_cache_the_grid_file_is_written_beside_once(tmp_path):
    blocked = tmp_path / "not_a_folder"
    blocked.write_text("a file where the cache directory would be")
    env = environment(blocked / "cache")
    config = write_config(tmp_path, "beside")
    run_model(env, config)
    grid = tmp_path / "beside.grid.nc"
    attrs = attributes(tmp_path / "beside.nc")
    assert attrs["mesh_file"] == str(grid) and attrs["mesh_file_relative"] == "beside.grid.nc"
    stat = grid.stat()
    run_model(env, config, "--set", "output.clobber=overwrite")    # a second run reuses it
    assert grid.stat().st_mtime_ns == stat.st_mtime_ns and grid.stat().st_ino == stat.st_ino
    out = run(env, ROOT / "run_model.py", config, "--no-progress", "--set", "mesh.generate.level=2",
              "--set", "output.clobber=overwrite")
    assert out.returncode != 0 and "holds another mesh" in out.stderr, out.stderr
    assert str(grid) in out.stderr and "output.path" in out.stderr
    # moved together, the history finds its grid by the relative path
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.move(tmp_path / "beside.nc", elsewhere / "beside.nc")
    shutil.move(grid, elsewhere / "beside.grid.nc")
    from framework.mesh_files import open_history

    with open_history(elsewhere / "beside.nc") as ds:
        assert ds.sizes["nCells"] == 642 and "kiteAreasOnVertex" in ds


def test_a_mesh_file_is_referenced_as_given_and_scaled_on_reading(tmp_path):
    import uxarray

    from grids.mpas_io import read_mesh
    from framework.mesh_files import history_mesh, open_history

    mesh = tmp_path / "x1.162.grid.nc"
    shutil.copyfile(MESH_162, mesh)
    env = environment(tmp_path / "cache")
    config = write_config(tmp_path, "x1", mesh={"file": str(mesh)})
    run_model(env, config)
    assert attributes(tmp_path / "x1.nc")["mesh_file"] == str(mesh)
    assert not (tmp_path / "x1.grid.nc").exists()
    model = read_mesh(mesh, sphere_radius=EARTH)
    with open_history(tmp_path / "x1.nc") as ds:            # a unit-sphere file, at the run's radius
        for name in ("areaCell", "dcEdge", "kiteAreasOnVertex", "xVertex"):
            np.testing.assert_allclose(ds[name].values, getattr(model, name), rtol=1e-15,
                                       err_msg=name)
        assert np.array_equal(ds["latCell"].values, model.latCell)
        mass = ds["mass"].values
        area = float(ds["areaCell"].sum())
    assert np.array_equal(history_mesh(tmp_path / "x1.nc").areaCell, model.areaCell)
    # UXarray's own face areas: the file's to its precision (single-precision-era MPAS mesh)
    uxds = uxarray.open_dataset(mesh, tmp_path / "x1.nc")
    mean_h = uxds["h"].isel(nVertLevels=0).weighted_mean().values
    np.testing.assert_allclose(mean_h * area, mass, rtol=1e-8)
    # recomputed geometry is not the file's: the run's mesh goes beside the history
    recomputed = write_config(tmp_path, "x1r", mesh={"file": str(mesh), "recompute_geometry": True})
    run_model(env, recomputed)
    assert attributes(tmp_path / "x1r.nc")["mesh_file"] == str(tmp_path / "x1r.grid.nc")


def test_gradient_files_reference_the_grid_too(referenced, tmp_path):
    import uxarray

    _, grid, env = referenced
    config = write_config(tmp_path, "sens", level=4, sensitivity={
        "cost": {"kind": "mean", "field": "h", "box": {"lat": [20, 50], "lon": [300, 340]}},
        "controls": ["h", "u"], "output": str(tmp_path / "gradients.nc")})
    run_model(env, config)
    attrs = attributes(tmp_path / "gradients.nc")
    assert attrs["mesh_file"] == str(grid.resolve()) and "areaCell" not in variables(
        tmp_path / "gradients.nc")
    uxds = uxarray.open_dataset(grid, tmp_path / "gradients.nc")
    assert uxds["dJdh0"].sizes["n_face"] == uxds.uxgrid.n_face and float(abs(uxds["dJdh0"]).max()) > 0
    for name in ("dJdh0", "dJdu0"):
        png = tmp_path / f"gradients.{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name


def test_the_config_refuses_another_mesh_form(tmp_path):
    from framework.errors import ConfigError
    from swm.config import load_config

    with pytest.raises(ConfigError) as err:
        load_config(write_config(tmp_path, "bad", form="outside"))
    assert "output.mesh = 'outside'" in str(err.value) and "'reference'" in str(err.value)
    assert load_config(write_config(tmp_path, "default", form="auto")).output.mesh == "auto"


@pytest.mark.mpi
def test_two_ranks_write_the_one_process_referencing_history(tmp_path):
    from tests.test_mpi_ranks import _mpiexec

    env = environment(tmp_path / "cache")
    run_model(env, write_config(tmp_path, "one"))
    out = run(env, ROOT / "run_model.py", write_config(tmp_path, "two"), "--no-progress",
              mpiexec=[_mpiexec(), "-n", "2"])
    assert out.returncode == 0 and "2 ranks" in out.stderr, out.stderr
    a, b = fields(tmp_path / "one.nc"), fields(tmp_path / "two.nc")
    for name in ("h", "u", "vorticity", "Time"):
        assert np.array_equal(a[name], b[name]), name
    np.testing.assert_allclose(a["mass"], b["mass"], rtol=1e-14)     # a sum over ranks
    one, two = attributes(tmp_path / "one.nc"), attributes(tmp_path / "two.nc")
    assert one["mesh_file"] == two["mesh_file"] and "areaCell" not in variables(tmp_path / "two.nc")
