"""Issue 14: every bad mesh file gets a clear error. Each test makes the bad file from the real
MPAS mesh x1.162 (copy, open r+ with netCDF4, change one thing) and asserts the error: its type,
the file, the field, the first bad index, the value and what was expected."""
import os
import pathlib
import shutil
import subprocess
import sys
import warnings

import netCDF4
import numpy as np
import pytest

from grids import EARTH_RADIUS, MeshError, read_mesh

ROOT = pathlib.Path(__file__).resolve().parents[2]


def corrupt(src, dst, change=None):
    """Copy `src` to `dst`, apply change(ds) with the copy open r+ (raw values), return dst."""
    shutil.copy(src, dst)
    if change is not None:
        with netCDF4.Dataset(dst, "r+") as ds:
            ds.set_auto_maskandscale(False)
            change(ds)
    return dst


def check_cli(path, *extra):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "grids", "check", str(path), *extra], env=env,
                          capture_output=True, text=True, timeout=120)


def assert_cli_rejects(path, *texts):
    done = check_cli(path)
    assert done.returncode == 1 and done.stdout == "", done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    for text in (str(path),) + texts:
        assert text in lines[0], (text, lines[0])
    return lines[0]


# -- stored geometry that disagrees with the positions and connectivity --------------------------
@pytest.mark.parametrize("field, index, factor", [
    ("areaCell", 30, 1000.0), ("dvEdge", 40, 10.0), ("dcEdge", 7, 1.001),
    ("areaTriangle", 12, 0.5), ("kiteAreasOnVertex", (5, 1), 2.0), ("weightsOnEdge", (40, 0), -1.0)])
def test_scaled_geometry_is_an_error(x1_162_path, tmp_path, field, index, factor):
    def change(ds):
        ds[field][index] = ds[field][index] * factor

    bad = corrupt(x1_162_path, tmp_path / "bad.nc", change)
    with netCDF4.Dataset(x1_162_path) as ds:
        stored = float(ds[field][index]) * factor
        original = float(ds[field][index])
    with pytest.raises(MeshError) as info:
        read_mesh(bad)
    err = info.value
    assert (err.file, err.field, err.index) == (str(bad), field, index)
    assert err.value == pytest.approx(stored, rel=1e-15)
    assert err.derived == pytest.approx(original, rel=1e-5, abs=1e-6)
    assert "recompute_geometry=True" in str(err) and "derived" in str(err)
    label = f"{field}[{index}]" if isinstance(index, int) else f"{field}[{index[0]}, {index[1]}]"
    assert_cli_rejects(bad, label, "--recompute-geometry")
    # the fix the message names works, and gives the derived value
    mesh = read_mesh(bad, recompute_geometry=True)
    assert getattr(mesh, field)[index] == pytest.approx(original, rel=1e-5, abs=1e-6)
    assert check_cli(bad, "--recompute-geometry").returncode == 0


def test_flipped_angle_edge_is_an_error(x1_162_path, tmp_path):
    bad = corrupt(x1_162_path, tmp_path / "bad.nc",
                  lambda ds: ds["angleEdge"].__setitem__(9, ds["angleEdge"][9] + 0.5))
    with pytest.raises(MeshError) as info:
        read_mesh(bad)
    assert (info.value.field, info.value.index) == ("angleEdge", 9)


def test_geometry_on_the_wrong_radius(x1_162_path, tmp_path):
    """Positions on the Earth's radius, sphere_radius = 6371229, lengths and areas left on the
    unit sphere."""
    def change(ds):
        for name in ("xCell", "yCell", "zCell", "xEdge", "yEdge", "zEdge",
                     "xVertex", "yVertex", "zVertex"):
            ds[name][:] = ds[name][:] * EARTH_RADIUS
        ds.sphere_radius = EARTH_RADIUS

    bad = corrupt(x1_162_path, tmp_path / "bad.nc", change)
    with pytest.raises(MeshError) as info:
        read_mesh(bad)
    err = info.value
    assert err.field == "dcEdge" and err.index == 0
    assert err.derived == pytest.approx(err.value * EARTH_RADIUS, rel=1e-5)
    assert "stored / derived = 1.5" in str(err)          # 1 / 6371229 = 1.5696e-07
    assert_cli_rejects(bad, "dcEdge[0]")


def test_the_real_file_and_generated_meshes_pass(x1_162_path, tmp_path):
    from grids import generate_icosahedral, validate_mesh, write_mesh

    read_mesh(x1_162_path)
    read_mesh(x1_162_path, sphere_radius=EARTH_RADIUS)
    mesh = generate_icosahedral(3, lloyd_iterations=2)
    validate_mesh(mesh)
    write_mesh(mesh, tmp_path / "g.nc")
    validate_mesh(read_mesh(tmp_path / "g.nc", reorder="hilbert")[0])


# -- fill values: variables defined but never written --------------------------------------------
def copy_without_data(src, dst, fmt, skip, last=None):
    """Copy every dimension, attribute and variable of `src` into a new `fmt` file, leaving the
    data of `skip` unwritten (fill on); `last` is defined last (so its data ends the file)."""
    with netCDF4.Dataset(src) as a, netCDF4.Dataset(dst, "w", format=fmt) as b:
        a.set_auto_maskandscale(False)
        b.set_auto_maskandscale(False)
        b.setncatts({k: a.getncattr(k) for k in a.ncattrs()})
        for name, dim in a.dimensions.items():
            b.createDimension(name, None if dim.isunlimited() else len(dim))
        names = [n for n in a.variables if n != last] + ([last] if last else [])
        for name in names:
            b.createVariable(name, a[name].dtype, a[name].dimensions)
        for name in names:
            if name != skip:
                b[name][...] = a[name][...]
    return dst


@pytest.mark.parametrize("fmt, field", [("NETCDF3_64BIT_OFFSET", "areaCell"),
                                        ("NETCDF4", "dvEdge"), ("NETCDF3_CLASSIC", "cellsOnEdge")])
def test_fill_values_are_errors(x1_162_path, tmp_path, fmt, field):
    bad = copy_without_data(x1_162_path, tmp_path / "bad.nc", fmt, field)
    with pytest.raises(MeshError) as info:
        read_mesh(bad)
    err = info.value
    assert (err.file, err.field) == (str(bad), field) and err.index in (0, (0, 0))
    assert err.value in (netCDF4.default_fillvals["f8"], netCDF4.default_fillvals["i4"])
    assert "fill value" in str(err)
    assert_cli_rejects(bad, field, "fill value")


def test_an_explicit_fill_value_is_an_error(x1_162_path, tmp_path):
    def change(ds):
        ds["dcEdge"].setncattr("missing_value", -1.0)
        ds["dcEdge"][17] = -1.0

    bad = corrupt(x1_162_path, tmp_path / "bad.nc", change)
    with pytest.raises(MeshError, match="fill value") as info:
        read_mesh(bad)
    assert (info.value.field, info.value.index, info.value.value) == ("dcEdge", 17, -1.0)


# -- truncated files ---------------------------------------------------------------------------
@pytest.mark.parametrize("fmt, last, cut", [
    ("NETCDF3_64BIT_OFFSET", None, 100), ("NETCDF3_64BIT_OFFSET", "weightsOnEdge", 1000),
    ("NETCDF3_64BIT_OFFSET", "kiteAreasOnVertex", 100), ("NETCDF3_64BIT_OFFSET", "dvEdge", 100),
    ("NETCDF3_CLASSIC", "dvEdge", 8), ("NETCDF3_64BIT_DATA", "areaCell", 1),
    ("NETCDF4", None, 100), ("NETCDF4", None, 20000)])
def test_a_truncated_file_is_reported_as_truncated(x1_162_path, tmp_path, fmt, last, cut):
    good = copy_without_data(x1_162_path, tmp_path / "good.nc", fmt, skip=None, last=last)
    read_mesh(good)
    size = os.path.getsize(good)
    bad = tmp_path / "bad.nc"
    bad.write_bytes(good.read_bytes()[:size - cut])
    with pytest.raises(MeshError) as info:
        read_mesh(bad)
    err = info.value
    assert err.file == str(bad) and "truncated" in str(err), str(err)
    assert err.value == size - cut and str(size) in str(err)
    assert_cli_rejects(bad, "truncated")


# -- messages ------------------------------------------------------------------------------------
def test_topology_errors_print_the_files_numbers(x1_162_path, tmp_path):
    with netCDF4.Dataset(x1_162_path) as ds:
        eoc = np.asarray(ds["edgesOnCell"][:])
    lost, dup = int(eoc[20, 0]), int(eoc[20, 1])      # 1-based, as in the file
    bad = corrupt(x1_162_path, tmp_path / "bad.nc",
                  lambda ds: ds["edgesOnCell"].__setitem__((20, 0), dup))
    with pytest.raises(MeshError) as info:
        read_mesh(bad)
    text = str(info.value)
    assert f"edge {min(lost, dup)} appears" in text and "1-based as in the file" in text, text
    assert_cli_rejects(bad, f"edge {min(lost, dup)} appears")


def test_orientation_errors_print_the_files_numbers(x1_162_path, tmp_path):
    with netCDF4.Dataset(x1_162_path) as ds:
        coe = np.asarray(ds["cellsOnEdge"][:])
    e = 33
    bad = corrupt(x1_162_path, tmp_path / "bad.nc",
                  lambda ds: ds["cellsOnEdge"].__setitem__(e, coe[e, ::-1]))
    with pytest.raises(MeshError) as info:
        read_mesh(bad)
    err = info.value
    assert err.field == "cellsOnEdge" and err.index == e
    assert err.value == [int(coe[e, 1]), int(coe[e, 0])]       # the file's (1-based) values
    assert f"edge {e + 1} " in str(err) and "1-based as in the file" in str(err)


@pytest.mark.parametrize("validate", [True, False])
def test_a_position_off_the_sphere(x1_162_path, tmp_path, validate):
    bad = corrupt(x1_162_path, tmp_path / "bad.nc",
                  lambda ds: ds["xCell"].__setitem__(11, ds["xCell"][11] * 1.02 + 0.01))
    with pytest.raises(MeshError) as info:
        read_mesh(bad, validate=validate)
    err = info.value
    assert (err.file, err.field, err.index) == (str(bad), "xCell", 11)
    assert isinstance(err.value, float) and abs(err.value - 1.0) > 1e-6      # |x| on a unit sphere
    assert "np.float64" not in str(err) and "missing" not in str(err)
    line = assert_cli_rejects(bad, "xCell[11]", "off the sphere")
    assert "np." not in line


@pytest.mark.parametrize("radius", [float("nan"), float("inf"), -1.0, 0.0, "abc"])
def test_a_bad_radius_argument_blames_the_argument(x1_162_path, radius):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError) as info:
            read_mesh(x1_162_path, sphere_radius=radius)
    assert not isinstance(info.value, MeshError)
    assert "sphere_radius" in str(info.value) and "argument" in str(info.value)
    assert "xCell" not in str(info.value)


def test_check_radius_inf_warns_nothing(x1_162_path):
    done = check_cli(x1_162_path, "--radius", "inf")
    assert done.returncode == 2 and "Warning" not in done.stderr and "Traceback" not in done.stderr
    assert "--radius inf" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_header_cut_short_is_truncated(x1_162_path, tmp_path):
    bad = tmp_path / "bad.nc"
    bad.write_bytes(x1_162_path.read_bytes()[:500])
    with pytest.raises(MeshError, match="truncated classic netCDF file: 500 bytes") as info:
        read_mesh(bad)
    assert info.value.file == str(bad)


def test_masked_entries_read_by_xarray_are_errors(x1_162_path, tmp_path):
    """xarray's default decoding turns fill values into NaN: an error, never a number."""
    import grids
    import xarray as xr

    bad = copy_without_data(x1_162_path, tmp_path / "bad.nc", "NETCDF3_64BIT_OFFSET", "areaCell")
    with xr.open_dataset(bad) as ds:
        with pytest.raises(MeshError) as info:
            grids.from_xarray(ds, source=str(bad))
    err = info.value
    assert (err.field, err.index) == ("areaCell", 0) and "fill value" in str(err)


def test_a_nan_in_a_dataset_is_an_error(x1_162_path):
    import grids

    ds = grids.to_xarray(read_mesh(x1_162_path))
    ds["dvEdge"].values[5] = np.nan
    with pytest.raises(MeshError) as info:
        grids.from_xarray(ds)
    err = info.value
    assert (err.field, err.index) == ("dvEdge", 5) and "masked or fill value" in str(err)


def test_a_coriolis_parameter_off_2_omega_sin_lat(x1_162_path, tmp_path):
    from grids import write_mesh
    from grids.geometry import complete_mesh
    from grids.mesh import REQUIRED_FIELDS

    mesh = read_mesh(x1_162_path)
    # any one rotation rate is fine (another planet), as long as every entry agrees with it
    other = complete_mesh({k: getattr(mesh, k) for k in REQUIRED_FIELDS}, 1.0, omega=3e-4)
    write_mesh(other, tmp_path / "f.nc")
    read_mesh(tmp_path / "f.nc")
    bad = corrupt(tmp_path / "f.nc", tmp_path / "bad.nc",
                  lambda ds: ds["fVertex"].__setitem__(3, ds["fVertex"][3] * 1.5 + 1e-6))
    with pytest.raises(MeshError) as info:
        read_mesh(bad)
    err = info.value
    assert (err.field, err.index) == ("fVertex", 3) and err.derived == pytest.approx(
        other.fVertex[3], rel=1e-9)
    assert "recompute_geometry=True" in str(err)
