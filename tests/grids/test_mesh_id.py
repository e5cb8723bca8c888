"""mesh_id of a generated mesh file: beside the attributes MPAS-Model's bootstrapping reads
(on_a_sphere, sphere_radius, parent_id, file_id, mesh_spec, is_periodic, x_period, y_period), a
generated mesh file carries mesh_id, a deterministic hash of its cell positions
(`grids.mpas_io.mesh_id_of`): recomputed from the file's own xCell, yCell, zCell it is the same;
the same mesh generated again has the same mesh_id (and another file_id); its cells in a fresh
random order, or reordered, keep it; another mesh (one position moved by one ulp, another Lloyd
count) has another."""
import re


import netCDF4
import numpy as np
import pytest

from grids import read_mesh, write_mesh
from grids.icosahedral import write_icosahedral
from grids.mpas_io import MESH_ID_LENGTH, mesh_id_of, reorder_keeping_ids

READ_BY_MPAS = ("on_a_sphere", "sphere_radius", "parent_id", "file_id", "mesh_spec",
                "is_periodic", "x_period", "y_period")


def attributes_and_cells(path):
    with netCDF4.Dataset(path) as ds:
        attrs = {name: ds.getncattr(name) for name in ds.ncattrs()}
        cells = tuple(np.asarray(ds[name][:], dtype=np.float64) for name in ("xCell", "yCell", "zCell"))
    return attrs, cells


def test_a_generated_mesh_file_carries_mesh_id_and_what_mpas_reads(tmp_path):
    rng = np.random.default_rng()
    first, again, other = tmp_path / "a.grid.nc", tmp_path / "b.grid.nc", tmp_path / "c.grid.nc"
    write_icosahedral(2, first, lloyd_iterations=1)
    write_icosahedral(2, again, lloyd_iterations=1)
    write_icosahedral(2, other, lloyd_iterations=2)
    attrs, cells = attributes_and_cells(first)
    for name in READ_BY_MPAS + ("mesh_id",):
        assert name in attrs, name
    assert re.fullmatch(rf"[0-9a-f]{{{MESH_ID_LENGTH}}}", attrs["mesh_id"])
    assert attrs["mesh_id"] == mesh_id_of(*cells)
    again_attrs, _ = attributes_and_cells(again)
    assert again_attrs["mesh_id"] == attrs["mesh_id"] and again_attrs["file_id"] != attrs["file_id"]
    assert attributes_and_cells(other)[0]["mesh_id"] != attrs["mesh_id"]

    perm = rng.permutation(cells[0].size)
    assert mesh_id_of(*(c[perm] for c in cells)) == attrs["mesh_id"]
    moved = [c.copy() for c in cells]
    i, k = int(rng.integers(cells[0].size)), int(rng.integers(3))
    moved[k][i] = np.nextafter(moved[k][i], np.inf)
    assert mesh_id_of(*moved) != attrs["mesh_id"]

    mesh = read_mesh(first)
    assert mesh.attributes["mesh_id"] == attrs["mesh_id"]
    reordered, _ = reorder_keeping_ids(mesh, "hilbert")
    assert not np.array_equal(reordered.xCell, mesh.xCell)
    write_mesh(reordered, tmp_path / "hilbert.grid.nc")
    hilbert, hilbert_cells = attributes_and_cells(tmp_path / "hilbert.grid.nc")
    assert hilbert["mesh_id"] == attrs["mesh_id"] == mesh_id_of(*hilbert_cells)
    assert hilbert["parent_id"].startswith(attrs["file_id"])


#: MPAS's own 162-cell grid file (MpasMeshConverter.x), as distributed with MPAS-Model's meshes.
X1_162 = __import__("pathlib").Path(__file__).resolve().parents[1] / "data" / "x1.162.grid.nc"
#: What MpasMeshConverter.x writes beyond MPAS-Atmosphere's mesh var_struct (what it reads of a grid
#: file: src/core_atmosphere/Registry.xml): the mesh's quality diagnostics, gridSpacing and
#: boundaryVertex (0 on a sphere).
CONVERTER_DIAGNOSTICS = {"cellQuality", "triangleQuality", "triangleAngleQuality", "obtuseTriangle",
                         "gridSpacing", "boundaryVertex"}
#: The grid-file variables of MPAS-Atmosphere's mesh var_struct (its init and restart streams).
MPAS_ATMOSPHERE_MESH = tuple(f"{q}{where}" for where in ("Cell", "Edge", "Vertex")
                             for q in ("lat", "lon", "x", "y", "z")) + (
    "indexToCellID", "indexToEdgeID", "indexToVertexID", "cellsOnEdge", "nEdgesOnCell",
    "nEdgesOnEdge", "edgesOnCell", "edgesOnEdge", "weightsOnEdge", "dvEdge", "dcEdge", "angleEdge",
    "areaCell", "areaTriangle", "cellsOnCell", "verticesOnCell", "verticesOnEdge", "edgesOnVertex",
    "cellsOnVertex", "kiteAreasOnVertex", "fEdge", "fVertex", "meshDensity")


def structure(path):
    """({attribute: type}, dimension names, variable names: (dimensions, dtype kind))."""
    with netCDF4.Dataset(path) as ds:
        attrs = {name: type(np.asarray(ds.getncattr(name)).item()) for name in ds.ncattrs()}
        variables = {name: (v.dimensions, v.dtype.kind) for name, v in ds.variables.items()}
        return attrs, set(ds.dimensions), variables


def test_a_generated_mesh_file_has_what_an_mpas_grid_file_has(tmp_path):
    """Every global attribute of MPAS's own x1.162.grid.nc (MpasMeshConverter.x), of the same
    type, every dimension, and every variable with its dimensions and kind, but the converter's
    diagnostics; every grid variable MPAS-Atmosphere reads; plus mesh_id, parent_id, x_period and
    y_period."""
    theirs, their_dims, their_vars = structure(X1_162)
    path = tmp_path / "g.grid.nc"
    write_icosahedral(2, path)
    ours, our_dims, our_vars = structure(path)
    assert {k: ours.get(k) for k in theirs} == theirs
    assert set(READ_BY_MPAS) | {"mesh_id"} <= set(ours)
    assert their_dims <= our_dims
    assert set(MPAS_ATMOSPHERE_MESH) <= set(our_vars)
    missing = {name for name in their_vars if name not in our_vars}
    assert missing == CONVERTER_DIAGNOSTICS & set(their_vars)
    assert {n: our_vars[n] for n in their_vars if n in our_vars} == \
        {n: v for n, v in their_vars.items() if n in our_vars}


def strip_mesh_id(path) -> None:
    """Make `path` a cache file as written before meshes carried mesh_id."""
    with netCDF4.Dataset(path, "a") as ds:
        ds.delncattr("mesh_id")


def test_a_cached_mesh_without_mesh_id_gets_it_on_read_and_in_the_file(tmp_path, caplog):
    """The file is given the mesh_id of its cells (atomically: no temporary left), still a valid
    cache file (checksums, key); the next hit reads it from the file; the mesh equals the fresh
    one."""
    import logging

    from grids.cache import cache_path, cached_icosahedral

    caplog.set_level(logging.INFO, logger="grids")
    fresh = cached_icosahedral(2, lloyd_iterations=1, cache_dir=tmp_path)
    path = cache_path(2, lloyd_iterations=1, cache_dir=tmp_path)
    strip_mesh_id(path)
    assert "mesh_id" not in attributes_and_cells(path)[0]
    caplog.clear()
    mesh = cached_icosahedral(2, lloyd_iterations=1, cache_dir=tmp_path)
    assert "given its mesh_id" in caplog.text and "regenerating" not in caplog.text
    attrs, cells = attributes_and_cells(path)
    assert mesh.attributes["mesh_id"] == attrs["mesh_id"] == mesh_id_of(*cells) == \
        fresh.attributes["mesh_id"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]
    caplog.clear()
    again = cached_icosahedral(2, lloyd_iterations=1, cache_dir=tmp_path)
    assert "cache hit" in caplog.text and "given its mesh_id" not in caplog.text
    assert again.attributes["mesh_id"] == attrs["mesh_id"]
    for name in ("xCell", "cellsOnEdge", "areaCell"):
        assert np.array_equal(getattr(again, name), getattr(fresh, name))


def test_a_cache_that_cannot_be_written_keeps_the_mesh_id_in_memory(tmp_path, caplog,
                                                                     monkeypatch):
    """A cache file whose folder refuses writes (a rename that fails with EROFS, as on a read-only
    file system): the mesh still carries its mesh_id, the file is left byte for byte, one warning
    names it."""
    import errno
    import logging
    import os

    from grids.cache import cache_path, cached_icosahedral

    cached_icosahedral(2, cache_dir=tmp_path)
    path = cache_path(2, cache_dir=tmp_path)
    strip_mesh_id(path)
    before = path.read_bytes()

    def read_only(*args):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))
    monkeypatch.setattr(os, "replace", read_only)
    caplog.set_level(logging.INFO, logger="grids")
    mesh = cached_icosahedral(2, cache_dir=tmp_path)
    monkeypatch.undo()
    assert mesh.attributes["mesh_id"] == mesh_id_of(mesh.xCell, mesh.yCell, mesh.zCell)
    assert path.read_bytes() == before
    assert f"cache file {path} has no mesh_id and cannot be given one" in caplog.text
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]
