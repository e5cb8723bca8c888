"""The files a run writes as MPAS and CF tools read them (xarray, UXarray when installed), from
level-2 runs through run_model.py: the history's Time decodes, every model variable has units and
a long name, the topography is h_s(nCells) once, MPAS's further shallow-water fields are there and
agree with the tendencies, and history, restart, sensitivity and 4D-Var files carry the run's
provenance and a decodable Time. `python -m swm.plot` ends bad input with one line and status 2."""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
NEW_FIELDS = {"v": "nEdges", "h_edge": "nEdges", "pv_vertex": "nVertices", "pv_edge": "nEdges",
              "pv_cell": "nCells", "vorticity_cell": "nCells", "uReconstructX": "nCells",
              "uReconstructY": "nCells", "uReconstructZ": "nCells"}
PROVENANCE = ("model_name", "core_name", "model_version", "config", "history")


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    return {**os.environ, "MESHOPS_CACHE_DIR": str(cache), "MESHOPS_NO_MPI": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def write_config(directory, name, **sections):
    tree = {"mesh": {"generate": {"level": 2, "lloyd": 0}}, "case": {"name": "williamson5"},
            "time": {"days": 0.25, "dt": 1800}, "output": {"path": str(directory / f"{name}.nc"),
                                                          "interval_hours": 3},
            "restart": {"path": str(directory / f"{name}.restart.nc"), "interval_hours": 6}}
    tree.update(sections)
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(tree))
    return path


def run(env, *args):
    out = subprocess.run([sys.executable, *map(str, args)], env=env, capture_output=True,
                         text=True, timeout=600)
    return out


@pytest.fixture(scope="module")
def history(tmp_path_factory, env):
    """A level-2 Williamson 5 run writing every registered field: (history, restart, config)."""
    from swm.variables import OUTPUT_VARIABLES

    tmp = tmp_path_factory.mktemp("history")
    config = write_config(tmp, "w5", output={"path": str(tmp / "w5.nc"), "interval_hours": 3,
                                             "variables": list(OUTPUT_VARIABLES)})
    out = run(env, ROOT / "run_model.py", config, "--no-progress")
    assert out.returncode == 0, out.stderr
    return tmp / "w5.nc", tmp / "w5.restart.nc", config


@pytest.fixture(scope="module")
def referenced_history(tmp_path_factory, env):
    """The `history` run with output.mesh = reference: (history, its grid file in the cache)."""
    from swm.variables import OUTPUT_VARIABLES

    tmp = tmp_path_factory.mktemp("referenced")
    config = write_config(tmp, "w5", output={"path": str(tmp / "w5.nc"), "interval_hours": 3,
                                             "variables": list(OUTPUT_VARIABLES),
                                             "mesh": "reference"})
    out = run(env, ROOT / "run_model.py", config, "--no-progress")
    assert out.returncode == 0, out.stderr
    with netCDF4_dataset(tmp / "w5.nc") as ds:
        return tmp / "w5.nc", pathlib.Path(ds.mesh_file)


def history_and_grid(form, request):
    """(history, grid file) of the `history` run with the mesh inside or referenced."""
    if form == "inside":
        path = request.getfixturevalue("history")[0]
        return path, path
    return request.getfixturevalue("referenced_history")


def check_provenance(attrs, config):
    from meshrun.config import dump, load_config
    from framework.output import MODEL_NAME

    import meshops

    assert all(key in attrs for key in PROVENANCE), sorted(attrs)
    assert attrs["model_name"] == MODEL_NAME and attrs["core_name"] == "sw"
    assert attrs["model_version"] == meshops.__version__ != ""
    assert attrs["config"] == dump(load_config(config))
    last = attrs["history"].splitlines()[-1]
    stamp, _, command = last.partition(": ")
    assert stamp.endswith("Z") and "T" in stamp, last
    assert command.startswith("run_model.py ") and str(config) in command, last


def test_history_decodes_with_units_and_long_names(history):
    import cftime
    import xarray as xr

    path, _, config = history
    with xr.open_dataset(path) as ds:
        assert isinstance(ds["Time"].values[0], cftime.DatetimeNoLeap)
        assert [t.hour for t in ds["Time"].values] == [0, 3, 6]
        for name, var in ds.data_vars.items():
            if "Time" in var.dims and name != "xtime" or name == "h_s":
                assert var.attrs.get("units") and var.attrs.get("long_name"), name
        check_provenance(ds.attrs, config)


#: Global attributes MPAS writes into its output (mpas_subdriver.F add_stream_attributes, the
#: bootstrapping's mesh attributes) and the few this model adds (its provenance, the restart keys).
MPAS_ATTRIBUTES = {"model_name", "core_name", "source", "Conventions", "on_a_sphere", "sphere_radius",
                   "is_periodic", "x_period", "y_period", "history", "file_id", "parent_id", "mesh_spec",
                   "mesh_id"}
OWN_ATTRIBUTES = {"model_version", "config", "mesh_fingerprint", "trajectory_settings",
                  "mesh_file", "mesh_file_relative", "mesh_file_fingerprint"}
#: The sw core's Registry: mesh fields of its input stream, fields of its output stream.
MPAS_SW_VARIABLES = {
    "latCell", "lonCell", "xCell", "yCell", "zCell", "latEdge", "lonEdge", "xEdge", "yEdge", "zEdge",
    "latVertex", "lonVertex", "xVertex", "yVertex", "zVertex", "indexToCellID", "indexToEdgeID",
    "indexToVertexID", "meshDensity", "cellsOnEdge", "nEdgesOnCell", "nEdgesOnEdge", "edgesOnCell",
    "edgesOnEdge", "weightsOnEdge", "dvEdge", "dcEdge", "angleEdge", "areaCell", "areaTriangle",
    "cellsOnCell", "verticesOnCell", "verticesOnEdge", "edgesOnVertex", "cellsOnVertex",
    "kiteAreasOnVertex", "fEdge", "fVertex", "fCell", "h_s", "xtime", "u", "h", "v", "divergence",
    "vorticity", "vorticity_cell", "pv_edge", "h_edge", "ke", "pv_vertex", "pv_cell", "uReconstructX",
    "uReconstructY", "uReconstructZ", "uReconstructZonal", "uReconstructMeridional"}
#: Added: the CF time, the signs of the TRiSK operators, the diagnostics time series.
OWN_VARIABLES = {"Time", "edgeSignOnCell", "edgeSignOnVertex", "mass", "energy", "potential_enstrophy",
                 "max_cfl", "h_min", "h_max"}


@pytest.mark.parametrize("form", ["inside", "reference"])
def test_every_mesh_variable_has_registry_units_and_long_name(form, request):
    """The history's mesh variables (all 41 inside it, or latCell / lonCell beside a reference)
    and its grid file's carry MPAS Registry units and long_name; xarray and cf_xarray read both."""
    import cf_xarray  # noqa: F401 - registers the .cf accessor
    import netCDF4
    import xarray as xr

    from grids.mpas_io import MESH_VARIABLE_ATTRIBUTES

    path, grid = history_and_grid(form, request)
    for name_of_file, expected in ((path, 41 if form == "inside" else 2), (grid, 41)):
        with netCDF4.Dataset(name_of_file) as ds:
            mesh = [name for name in ds.variables if name in MESH_VARIABLE_ATTRIBUTES]
            assert len(mesh) == expected, mesh
            for name in mesh:
                assert (ds[name].units, ds[name].long_name) == MESH_VARIABLE_ATTRIBUTES[name], name
            assert (ds["latCell"].units, ds["latCell"].long_name) == ("radians", "Latitude of cells")
        with xr.open_dataset(name_of_file) as ds:
            assert ds["lonCell"].attrs["long_name"] == "Longitude of cells"
            if name_of_file == path:
                assert ds.cf.axes["T"] == ["Time"]


@pytest.mark.parametrize("form", ["inside", "reference"])
def test_an_mpas_user_finds_nothing_foreign(form, request):
    """Every global attribute and variable of a history is MPAS's (sw Registry, output attributes,
    ``config_*`` namelist options) or one of the few the model adds; nothing from the mesh cache."""
    import netCDF4

    path, _ = history_and_grid(form, request)
    with netCDF4.Dataset(path) as ds:
        attrs = set(ds.ncattrs())
        assert attrs - MPAS_ATTRIBUTES - OWN_ATTRIBUTES == {a for a in attrs if a.startswith("config_")}
        assert ds.config_test_case == 5 and ds.config_time_integration == "RK4"
        assert ds.config_dt == 1800.0 and ds.config_run_duration == "0_06:00:00"
        assert ds.config_calendar_type == "gregorian_noleap" and ds.config_start_time == "0000-01-01_00:00:00"
        assert set(ds.variables) - MPAS_SW_VARIABLES - OWN_VARIABLES == set()
        assert ds.source.startswith("meshops grids.icosahedral") and ds.Conventions == "MPAS"


def test_topography_is_h_s_once(history):
    import xarray as xr

    path, _, _ = history
    with xr.open_dataset(path) as ds:
        assert "b" not in ds.variables
        h_s = ds["h_s"]
        assert h_s.dims == ("nCells",) and h_s.attrs["units"] == "m"
        assert h_s.attrs["long_name"] == "bottom topography (height of the surface below the fluid)"
        # Williamson case 5's mountain: 2000 m high, zero away from it
        assert 1500 < float(h_s.max()) <= 2000 and float(h_s.min()) == 0.0


def test_b_is_not_an_output_variable(tmp_path):
    from meshrun.config import ConfigError, load_config

    config = write_config(tmp_path, "b", output={"variables": ["h", "b"]})
    with pytest.raises(ConfigError) as err:
        load_config(config)
    assert "output.variables.1 = 'b'" in str(err.value) and "'pv_edge'" in str(err.value)
    assert "b" not in load_config(write_config(tmp_path, "d")).output.variables


def test_mpas_fields_are_written_and_agree_with_the_tendencies(history):
    import netCDF4

    import meshops
    from grids.mpas_io import read_mesh
    from swm.testcases import WILLIAMSON_OMEGA as OMEGA
    from swm.tendencies import Physics, diagnostics

    path, _, _ = history
    mesh = read_mesh(path)
    with netCDF4.Dataset(path) as ds:
        ds.set_auto_mask(False)
        n_time = ds.dimensions["Time"].size
        for name, dim in NEW_FIELDS.items():
            var = ds[name]
            assert var.dimensions == ("Time", dim, "nVertLevels"), name
            assert var.shape == (n_time, ds.dimensions[dim].size, 1), name
            assert np.isfinite(var[:]).all() and np.abs(var[-1]).max() > 0, name
        f = {name: ds[name][-1, :, 0] for name in ("h", "u", "vorticity", *NEW_FIELDS)}
    d = diagnostics(mesh, f["h"], f["u"], 2 * OMEGA * np.sin(mesh.latVertex), Physics())
    for name in ("pv_edge", "pv_vertex", "h_edge"):
        np.testing.assert_allclose(f[name], d[name], rtol=1e-12, atol=0, err_msg=name)
    np.testing.assert_allclose(f["pv_cell"], meshops.interp_v2c(mesh, f["pv_vertex"]), rtol=1e-12)
    np.testing.assert_allclose(f["vorticity_cell"], meshops.interp_v2c(mesh, f["vorticity"]),
                               rtol=1e-12, atol=1e-20)
    np.testing.assert_allclose(f["v"], meshops.tangential_e2e(mesh, f["u"]), rtol=1e-12, atol=1e-12)
    # the Cartesian reconstruction is tangent to the sphere
    xyz = np.stack([f["uReconstructX"], f["uReconstructY"], f["uReconstructZ"]], axis=1)
    r = np.stack([mesh.xCell, mesh.yCell, mesh.zCell], axis=1)
    r /= np.linalg.norm(r, axis=1)[:, None]
    assert np.abs((xyz * r).sum(axis=1)).max() < 1e-10 * np.abs(xyz).max()


def test_restart_has_time_and_provenance(history):
    import xarray as xr

    _, restart, config = history
    with xr.open_dataset(restart) as ds:
        stamp = ds["Time"].values[0]
        assert (stamp.day, stamp.hour) == (1, 6)
        assert b"".join(ds["xtime"].values[0:1].astype("S64")).decode().strip() == \
            "0000-01-01_06:00:00" == ds.attrs["xtime"]
        check_provenance(ds.attrs, config)


def test_a_resumed_run_adds_its_history_line_and_config(tmp_path, env):
    import xarray as xr

    config = write_config(tmp_path, "resume")
    assert run(env, ROOT / "run_model.py", config, "--no-progress").returncode == 0
    out = run(env, ROOT / "run_model.py", config, "--no-progress", "--set", "restart.resume=true",
              "--set", "time.days=0.5")
    assert out.returncode == 0, out.stderr
    with xr.open_dataset(tmp_path / "resume.nc") as ds:
        lines = [l for l in ds.attrs["history"].splitlines() if ": run_model.py " in l]
        assert len(lines) == 2 and "restart.resume=true" in lines[1] and ds.sizes["Time"] == 5
        assert ds.attrs["history"].splitlines()[-1] == lines[1]
        assert "days: 0.5" in ds.attrs["config"] and "resume: true" in ds.attrs["config"]


def test_sensitivity_and_fourdvar_files_have_time_and_provenance(tmp_path, env):
    import xarray as xr

    sensitivity = write_config(tmp_path, "sens", sensitivity={
        "cost": {"kind": "mean", "field": "h", "box": {"lat": [20, 50], "lon": [300, 340]}},
        "plot": False, "output": str(tmp_path / "gradients.nc")})
    fourdvar = write_config(tmp_path, "4dvar", fourdvar={
        "observation_hours": [3, 6], "iterations": 2, "output": str(tmp_path / "analysis.nc")})
    for config in (sensitivity, fourdvar):
        out = run(env, ROOT / "run_model.py", config, "--no-progress")
        assert out.returncode == 0, out.stderr
    for name, config in (("gradients.nc", sensitivity), ("analysis.nc", fourdvar)):
        with xr.open_dataset(tmp_path / name) as ds:
            stamp = ds["Time"].values
            assert stamp.size == 1 and (stamp[0].day, stamp[0].hour) == (1, 0), name
            assert ds["xtime"].values[0].decode().strip() == "0000-01-01_00:00:00", name
            check_provenance(ds.attrs, config)
    with xr.open_dataset(tmp_path / "analysis.observations.nc") as ds:
        check_provenance(ds.attrs, fourdvar)
    out = plot(env, tmp_path / "gradients.nc")      # still read as a gradient file
    assert out.returncode == 0 and "gradients.dJdh0.png" in out.stdout, out.stderr


@pytest.mark.parametrize("form", ["inside", "reference"])
def test_uxarray_reads_the_history_and_its_means_are_the_model_s(form, request):
    """UXarray's MPAS reader validates the history's grid (its face areas cover the sphere), and its
    area-weighted mean of h at every record is the model's mass diagnostic over the sphere's area;
    a history with its mesh opens as ``open_dataset(history, history)``, one that references its
    grid file as ``open_dataset(grid, history)``."""
    import uxarray

    from framework.mesh_files import open_history

    path, grid_file = history_and_grid(form, request)
    uxds = uxarray.open_dataset(grid_file, path)
    grid = uxds.uxgrid
    assert grid.validate() and uxds["h"].sizes["n_face"] == grid.n_face
    assert float(grid.face_areas.sum()) == pytest.approx(4 * np.pi, rel=1e-12)
    mean_h = uxds["h"].isel(nVertLevels=0).weighted_mean().values
    with open_history(path) as ds:
        area = ds["areaCell"].values.sum()
        mass = ds["mass"].values
        assert ds["mass"].attrs["units"] == "m3"
    np.testing.assert_allclose(mean_h * area, mass, rtol=1e-13)
    assert np.ptp(mean_h) > 0 or mean_h.size == 1             # a real series, one value per record


def test_xarray_and_cf_xarray_decode_the_time_axis(history):
    import cf_xarray  # noqa: F401 - registers the .cf accessor
    import cftime
    import xarray as xr

    path, restart, _ = history
    with xr.open_dataset(path) as ds:
        assert ds.cf.axes["T"] == ["Time"] and ds.cf["time"].name == "Time"
        at_3h = ds["h"].sel(Time=cftime.DatetimeNoLeap(0, 1, 1, 3, has_year_zero=True))
        assert at_3h.sizes == {"nCells": ds.sizes["nCells"], "nVertLevels": 1}
        assert float(at_3h.mean()) != float(ds["h"].isel(Time=0).mean())
    with xr.open_dataset(restart) as ds:
        assert ds.cf.axes["T"] == ["Time"]


def test_uxarray_reads_restart_and_gradient_files_on_the_run_s_grid(history, tmp_path, env):
    """A restart holds no mesh: UXarray reads it on the history's grid; a gradient file holds its
    mesh and opens on its own."""
    import uxarray

    path, restart, _ = history
    uxds = uxarray.open_dataset(path, restart)
    assert uxds["h"].sizes["n_face"] == uxds.uxgrid.n_face and uxds["u"].sizes["n_edge"] == uxds.uxgrid.n_edge
    config = write_config(tmp_path, "sens", sensitivity={
        "cost": {"kind": "mean", "field": "h", "box": {"lat": [20, 50], "lon": [300, 340]}},
        "plot": False, "output": str(tmp_path / "gradients.nc")})
    out = run(env, ROOT / "run_model.py", config, "--no-progress")
    assert out.returncode == 0, out.stderr
    gradients = uxarray.open_dataset(tmp_path / "gradients.nc", tmp_path / "gradients.nc")
    assert gradients.uxgrid.validate()
    assert gradients["dJdh0"].sizes["n_face"] == gradients.uxgrid.n_face
    assert float(abs(gradients["dJdh0"]).max()) > 0


def netCDF4_dataset(path):
    import netCDF4

    return netCDF4.Dataset(path)


def plot(env, *args):
    out = run(env, "-m", "swm.plot", *args)
    assert "Traceback" not in out.stderr, out.stderr
    return out


def test_plot_refuses_bad_input_in_one_line(history, tmp_path, env):
    from grids.cache import cached_icosahedral
    from grids.mpas_io import write_mesh

    path, _, _ = history
    mesh_only = tmp_path / "mesh.nc"
    write_mesh(cached_icosahedral(2), mesh_only)
    for args, words in (((path, "--out", tmp_path / "nodir"), "no such directory"),
                        ((path, "--record", "99"), "--record 99: "),
                        ((mesh_only,), "no xtime or no h")):
        out = plot(env, *args)
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert out.stderr.startswith("python -m swm.plot: error: ") and words in out.stderr, out.stderr
    out = plot(env, path, "--record", "-3", "--out", tmp_path)
    assert out.returncode == 0 and "wrote" in out.stdout, out.stderr


def test_plot_help_and_run_model_version(env):
    import meshops

    out = plot(env, "--help")
    assert out.returncode == 0
    text = " ".join(out.stdout.split())
    assert "PNG maps of a history file or of a gradient file written by run_model.py." in text
    out = run(env, ROOT / "run_model.py", "--version")
    assert out.returncode == 0 and out.stdout.strip() == f"run_model.py (meshops {meshops.__version__})"
    out = plot(env, "--version")
    assert out.returncode == 0 and out.stdout.strip() == f"python -m swm.plot (meshops {meshops.__version__})"
