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
