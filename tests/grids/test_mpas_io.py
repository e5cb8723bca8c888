"""MPAS mesh files: reading the real x1.162 mesh, scaling, exact write/read round trips, extra
variables, atomic writes, reordering on read, and the xarray view."""
import os
import re

import netCDF4
import numpy as np
import pytest
import xarray as xr

import grids
import grids.mpas_io as mpas_io
from grids import EARTH_RADIUS, Mesh, MeshError, read_mesh, validate_mesh, write_mesh
from grids.mesh import FIELD_DIMS, INDEX_FIELDS

FORMATS = ["NETCDF3_64BIT_OFFSET", "NETCDF4"]


def raw_file(path):
    """Every variable and attribute of a netCDF file, read directly with netCDF4."""
    with netCDF4.Dataset(path) as ds:
        ds.set_auto_maskandscale(False)
        variables = {name: np.array(var[...]) for name, var in ds.variables.items()}
        dims = {name: len(d) for name, d in ds.dimensions.items()}
        attributes = {name: ds.getncattr(name) for name in ds.ncattrs()}
    return dims, variables, attributes


def assert_same_mesh(a: Mesh, b: Mesh):
    """Bitwise equality of every field (values and dtype), extra variable and attribute."""
    assert a.sphere_radius == b.sphere_radius
    for name in FIELD_DIMS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype, name
        assert x.shape == y.shape, name
        assert np.array_equal(np.ascontiguousarray(x).view(np.uint8),
                              np.ascontiguousarray(y).view(np.uint8)), name
    assert list(a.extra) == list(b.extra)
    for name, (dims, arr) in a.extra.items():
        assert b.extra[name][0] == dims, name
        assert b.extra[name][1].dtype == arr.dtype, name
        assert np.array_equal(b.extra[name][1], arr), name
    assert a.attributes.keys() == b.attributes.keys()
    for key, value in a.attributes.items():
        if key == "history":
            assert_history_extends(value, b.attributes[key])
            continue
        assert np.array_equal(np.asarray(b.attributes[key]), np.asarray(value)), key
    assert (a.nCellsSolve, a.nEdgesSolve, a.nVerticesSolve) == \
        (b.nCellsSolve, b.nEdgesSolve, b.nVerticesSolve)


HISTORY_LINE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ: written by meshops grids \S.*")


def assert_history_extends(old: str, new: str):
    """`new` is `old` with zero or more "<UTC ISO time>: written by meshops grids ..." lines after it
    (write_mesh appends one per write)."""
    assert new.startswith(old), (old, new)
    added = new[len(old):]
    for line in added.split("\n")[1:] if added else []:
        assert HISTORY_LINE.fullmatch(line), line
    assert not added or added.startswith("\n")


@pytest.fixture(scope="module")
def x1_mesh(x1_162_path):
    return read_mesh(x1_162_path)


def test_read_real_file_reproduces_stored_fields(x1_162_path, x1_mesh):
    mesh = x1_mesh
    assert (mesh.nCells, mesh.nEdges, mesh.nVertices, mesh.maxEdges) == (162, 480, 320, 6)
    assert (mesh.maxEdges2, mesh.vertexDegree, mesh.sphere_radius) == (12, 3, 1.0)
    dims, variables, attributes = raw_file(x1_162_path)
    stored = [name for name in FIELD_DIMS if name in variables]
    assert len(stored) >= 30
    for name in stored:
        want = variables[name] - 1 if name in INDEX_FIELDS else variables[name]
        assert np.array_equal(getattr(mesh, name), want), name
    # pads: 0 on disk, -1 in memory
    pentagon = np.flatnonzero(mesh.nEdgesOnCell == 5)
    assert pentagon.size == 12
    assert np.all(mesh.edgesOnCell[pentagon, 5] == -1)
    assert np.all(variables["edgesOnCell"][pentagon, 5] == 0)
    # uninterpreted variables kept as they are, attributes too
    for name, arr in variables.items():
        if name not in FIELD_DIMS:
            assert np.array_equal(mesh.extra[name][1], arr) and mesh.extra[name][1].dtype == arr.dtype
    assert set(mesh.extra) == set(variables) - set(FIELD_DIMS)
    assert mesh.attributes == attributes
    # fields the file lacks are derived
    for name in ("edgeSignOnCell", "edgeSignOnVertex", "fCell", "fEdge", "fVertex"):
        assert name not in variables
        assert np.all(np.isfinite(getattr(mesh, name)))
    assert np.allclose(mesh.fCell, 2 * 7.29212e-5 * np.sin(mesh.latCell), rtol=0, atol=1e-18)
    validate_mesh(mesh, source=str(x1_162_path))


def test_scaling_to_a_radius_is_exact(x1_162_path, x1_mesh):
    rng = np.random.default_rng()
    for radius in (EARTH_RADIUS, float(rng.uniform(1e5, 1e8))):
        mesh = read_mesh(x1_162_path, sphere_radius=radius)
        s = radius / 1.0
        assert mesh.sphere_radius == radius
        assert mesh.attributes["sphere_radius"] == radius
        for name in mpas_io.SCALED_LENGTHS:
            assert np.array_equal(getattr(mesh, name), getattr(x1_mesh, name) * s), name
        for name in mpas_io.SCALED_AREAS:
            assert np.array_equal(getattr(mesh, name), getattr(x1_mesh, name) * (s * s)), name
        for name in ("latCell", "lonEdge", "angleEdge", "weightsOnEdge", "fVertex", "edgesOnCell"):
            assert np.array_equal(getattr(mesh, name), getattr(x1_mesh, name)), name
        assert np.array_equal(mesh.extra["gridSpacing"][1], x1_mesh.extra["gridSpacing"][1] * s)
        assert np.array_equal(mesh.extra["meshDensity"][1], x1_mesh.extra["meshDensity"][1])
        assert mesh.areaCell.sum() == pytest.approx(4 * np.pi * radius**2, rel=1e-8)


@pytest.mark.parametrize("fmt", FORMATS)
def test_write_read_round_trip_is_exact(x1_162_path, x1_mesh, tmp_path, fmt):
    out = tmp_path / "copy.nc"
    write_mesh(x1_mesh, out, format=fmt)
    again = read_mesh(out)
    assert_same_mesh(x1_mesh, again)
    dims, written, attributes = raw_file(out)
    _, original, _ = raw_file(x1_162_path)
    with netCDF4.Dataset(out) as ds:
        assert ds.data_model == fmt
        assert ds.dimensions["Time"].isunlimited()
    for name in original:            # the MPAS file convention on disk: same bits as the source
        assert np.array_equal(written[name], original[name]), name
        assert written[name].dtype == original[name].dtype, name
    assert attributes["Conventions"] == "MPAS" and attributes["on_a_sphere"] == "YES"
    assert attributes["sphere_radius"] == 1.0
    # written twice gives the same mesh again (write -> read -> write -> read)
    write_mesh(again, out, format=fmt)
    assert_same_mesh(x1_mesh, read_mesh(out))


@pytest.mark.parametrize("fmt", FORMATS)
def test_generated_mesh_and_extra_variables_round_trip(tmp_path, fmt):
    from grids import generate_icosahedral

    rng = np.random.default_rng()
    radius = float(rng.uniform(1e6, 1e7))
    mesh = generate_icosahedral(1, sphere_radius=radius)
    extra = {
        "cellTracer": (("nCells",), rng.standard_normal(mesh.nCells)),
        "vertexFlag": (("nVertices",), rng.integers(-5, 5, mesh.nVertices).astype(np.int32)),
        "edgeLevels": (("nEdges", "nVertLevels"), rng.standard_normal((mesh.nEdges, 3))),
        "profile": (("nVertLevels",), rng.standard_normal(3).astype(np.float32)),
    }
    mesh = mesh.replace(extra=extra, attributes={**mesh.attributes, "sphere_radius": radius,
                                                 "title": "random test mesh"})
    out = tmp_path / "gen.nc"
    write_mesh(mesh, out, format=fmt)
    back = read_mesh(out)
    for name in FIELD_DIMS:
        assert np.array_equal(getattr(back, name), getattr(mesh, name)), name
    assert list(back.extra) == list(extra)
    for name, (dims, arr) in extra.items():
        assert back.extra[name][0] == dims and back.extra[name][1].dtype == arr.dtype
        assert np.array_equal(back.extra[name][1], arr), name
    assert back.attributes["title"] == "random test mesh"
    write_mesh(back, tmp_path / "gen2.nc", format=fmt)
    assert_same_mesh(back, read_mesh(tmp_path / "gen2.nc"))


def test_extra_variable_with_a_conflicting_size_is_refused(x1_mesh, tmp_path):
    bad = x1_mesh.replace(extra={**x1_mesh.extra, "oops": (("nCells",), np.ones(7))})
    with pytest.raises(MeshError, match="oops") as info:
        write_mesh(bad, tmp_path / "bad.nc")
    assert info.value.field == "oops" and "nCells = 162" in str(info.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_atomic_write_leaves_the_target_untouched(x1_mesh, tmp_path, monkeypatch, fmt):
    target = tmp_path / "mesh.nc"
    before = np.random.default_rng().integers(0, 256, 4096, dtype=np.uint8).tobytes()
    target.write_bytes(before)
    calls = []
    real = mpas_io._write_variable

    def failing(ds, name, arr):
        calls.append(name)
        if len(calls) == 20:
            raise RuntimeError("disk full (simulated)")
        return real(ds, name, arr)

    monkeypatch.setattr(mpas_io, "_write_variable", failing)
    with pytest.raises(RuntimeError, match="simulated"):
        write_mesh(x1_mesh, target, format=fmt)
    assert len(calls) == 20
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mesh.nc"]
    monkeypatch.setattr(mpas_io, "_write_variable", real)
    write_mesh(x1_mesh, target, format=fmt)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mesh.nc"]
    assert_same_mesh(x1_mesh, read_mesh(target))
    reference = tmp_path / "plain"
    reference.write_bytes(b"")                 # permissions as any new file gets them (umask)
    assert os.stat(target).st_mode & 0o777 == os.stat(reference).st_mode & 0o777


def test_unknown_format_and_missing_file(x1_mesh, tmp_path):
    with pytest.raises(ValueError, match="NETCDF5"):
        write_mesh(x1_mesh, tmp_path / "x.nc", format="NETCDF5")
    with pytest.raises(FileNotFoundError, match="nothere.nc"):
        read_mesh(tmp_path / "nothere.nc")


@pytest.mark.parametrize("method", ["morton", "hilbert"])
def test_read_with_reorder_returns_the_permutation(x1_162_path, x1_mesh, tmp_path, method):
    mesh, perm = read_mesh(x1_162_path, reorder=method)
    validate_mesh(mesh)
    assert not np.array_equal(perm.cells, np.arange(mesh.nCells))
    assert np.array_equal(mesh.xCell, x1_mesh.xCell[perm.cells])
    assert np.array_equal(mesh.dcEdge, x1_mesh.dcEdge[perm.edges])
    assert np.array_equal(mesh.areaTriangle, x1_mesh.areaTriangle[perm.vertices])
    # connectivity renumbered: new cell c's neighbours are the renumbered old neighbours
    new_of_old = np.empty_like(perm.cells)
    new_of_old[perm.cells] = np.arange(mesh.nCells)
    old_nbrs = x1_mesh.cellsOnCell[perm.cells]
    assert np.array_equal(mesh.cellsOnCell, np.where(old_nbrs >= 0, new_of_old[old_nbrs], -1))
    # the permutation travels as MPAS global IDs (the file held IDs 1..n)
    assert np.array_equal(mesh.extra["indexToCellID"][1], perm.cells + 1)
    assert np.array_equal(mesh.extra["indexToEdgeID"][1], perm.edges + 1)
    assert np.array_equal(mesh.extra["indexToVertexID"][1], perm.vertices + 1)
    assert np.array_equal(mesh.extra["meshDensity"][1], x1_mesh.extra["meshDensity"][1][perm.cells])
    write_mesh(mesh, tmp_path / "r.nc")
    assert_same_mesh(mesh, read_mesh(tmp_path / "r.nc"))


def test_recompute_geometry_agrees_with_the_file(x1_162_path, x1_mesh):
    fresh = read_mesh(x1_162_path, recompute_geometry=True)
    assert np.array_equal(fresh.xCell, x1_mesh.xCell)
    assert np.array_equal(fresh.edgesOnCell, x1_mesh.edgesOnCell)
    assert np.allclose(fresh.dcEdge, x1_mesh.dcEdge, rtol=1e-6, atol=0)   # converter: acos-based
    assert np.allclose(fresh.areaCell, x1_mesh.areaCell, rtol=1e-6, atol=0)
    assert not np.array_equal(fresh.areaCell, x1_mesh.areaCell)   # really recomputed


def test_xarray_round_trip_is_exact(x1_162_path, x1_mesh):
    ds = grids.to_xarray(x1_mesh)
    assert ds.attrs["index_base"] == 1 and ds.attrs["index_pad"] == 0
    assert ds["edgesOnCell"].dims == ("nCells", "maxEdges")
    # MPAS's file convention (1-based, 0 pads): the same values as the file itself
    with xr.open_dataset(x1_162_path, decode_cf=False, mask_and_scale=False) as raw:
        for name in INDEX_FIELDS:
            assert np.array_equal(ds[name].values, raw[name].values), name
    assert int(ds["edgesOnCell"].min()) == 0
    assert ds.sizes["nEdges"] == 480 and "meshDensity" in ds
    assert_same_mesh(x1_mesh, grids.from_xarray(ds))
    # a Dataset of the earlier in-memory convention (index_base = 0, -1 pads) is still read
    old = ds.copy()
    for name in INDEX_FIELDS:
        old[name] = ds[name] - 1
    old.attrs.update(index_base=np.int32(0), index_pad=np.int32(-1))
    assert_same_mesh(x1_mesh, grids.from_xarray(old))
    # an MPAS file opened directly by xarray (1-based) is converted
    with xr.open_dataset(x1_162_path, decode_cf=False, mask_and_scale=False) as raw:
        assert_same_mesh(x1_mesh, grids.from_xarray(raw, source=str(x1_162_path)))
    shifted = ds.copy()
    shifted.attrs["index_base"] = 7
    with pytest.raises(MeshError, match="index_base"):
        grids.from_xarray(shifted)


MESH_VARIABLES = set(FIELD_DIMS) | {"indexToCellID", "indexToEdgeID", "indexToVertexID",
                                    "meshDensity"}


def assert_registry_attributes(path):
    """Every one of the 41 mesh variables of the file has MPAS Registry units and long_name."""
    with netCDF4.Dataset(path) as ds:
        assert MESH_VARIABLES <= set(ds.variables), MESH_VARIABLES - set(ds.variables)
        for name in MESH_VARIABLES:
            var = ds[name]
            assert var.units and var.long_name, name
            assert (var.units, var.long_name) == mpas_io.MESH_VARIABLE_ATTRIBUTES[name], name
        assert (ds["latCell"].units, ds["latCell"].long_name) == ("radians", "Latitude of cells")
        assert ds["areaCell"].units == "m^2" and ds["dcEdge"].units == "m"
        assert ds["cellsOnEdge"].units == "unitless"
    with xr.open_dataset(path) as ds:            # xarray still decodes it, attributes included
        assert ds["areaCell"].attrs["long_name"] == "Spherical area of a Voronoi cell"


@pytest.mark.parametrize("writer", ["write_mesh", "write_icosahedral", "cache", "cli"])
def test_every_mesh_variable_has_units_and_long_name(tmp_path, monkeypatch, writer):
    import subprocess
    import sys

    from grids.icosahedral import generate_icosahedral, write_icosahedral

    path = tmp_path / "m.grid.nc"
    if writer == "write_mesh":
        write_mesh(generate_icosahedral(2), path, format="NETCDF4")
    elif writer == "write_icosahedral":
        write_icosahedral(2, path)
    elif writer == "cache":
        from grids.cache import cache_path, cached_icosahedral

        cached_icosahedral(2, cache_dir=tmp_path)
        path = cache_path(2, cache_dir=tmp_path)
    else:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        out = subprocess.run([sys.executable, "-m", "grids", "generate", "--level", "2", "-o",
                              str(path)], capture_output=True, text=True, cwd=root, timeout=300)
        assert out.returncode == 0, out.stderr
    assert_registry_attributes(path)


def test_to_xarray_gives_every_mesh_variable_its_attributes(x1_mesh):
    ds = grids.to_xarray(x1_mesh)
    for name in MESH_VARIABLES & set(ds.variables):
        assert (ds[name].attrs["units"], ds[name].attrs["long_name"]) == \
            mpas_io.MESH_VARIABLE_ATTRIBUTES[name], name
