"""Mesh <-> xarray.Dataset with MPAS dimension and variable names, in MPAS's file convention.

`to_xarray` gives what an MPAS mesh file opened with xarray gives: connectivity 1-based with 0
pads (edgesOnCell, cellsOnEdge, ...), so that readers of MPAS files (UXarray's MPAS reader, which
subtracts 1 and takes 0 as "no entry", with no attribute to say otherwise; MPAS tools) read the
right grid. The attributes index_base = 1 and index_pad = 0 say so. Lengths are in metres on a
sphere of radius sphere_radius (attribute), which UXarray divides out.

`from_xarray` reads such a Dataset, an MPAS file opened directly with xarray (1-based, 0 pads, no
index_base attribute), and Datasets of the earlier in-memory convention (index_base = 0: 0-based
with -1 pads).
"""
from __future__ import annotations

import numpy as np
import xarray as xr

from .mesh import FIELD_DIMS, INDEX_FIELDS, Mesh
from .mpas_io import mesh_variable_attributes
from .validate import MeshError

#: Dataset attributes describing the in-memory convention (not part of mesh.attributes).
CONVENTION_ATTRS = ("index_base", "index_pad", "sphere_radius", "nCellsSolve", "nEdgesSolve",
                    "nVerticesSolve")


def to_xarray(mesh: Mesh) -> xr.Dataset:
    """Mesh -> Dataset in MPAS's file convention: every MPAS field and extra variable with its MPAS
    dims.

    Index fields (`grids.mesh.INDEX_FIELDS`: edgesOnCell, cellsOnCell, verticesOnCell,
    cellsOnEdge, verticesOnEdge, edgesOnEdge, cellsOnVertex, edgesOnVertex) are 1-based with 0
    pads, as in an MPAS file (new arrays, of the mesh's index dtype); every other array is shared
    with the mesh. `uxarray.open_grid(to_xarray(mesh))` gives the mesh's grid.

    Each variable has its `units` and `long_name` (`grids.mpas_io.MESH_VARIABLE_ATTRIBUTES`).
    Attributes: mesh.attributes, then sphere_radius, index_base = 1, index_pad = 0 and the owned
    counts nCellsSolve, nEdgesSolve, nVerticesSolve (`from_xarray` restores them).
    """
    data = {}
    for name, arr in mesh.fields().items():
        if name in INDEX_FIELDS:
            arr = arr + arr.dtype.type(1)            # -1 pads -> 0, 0-based -> 1-based
        data[name] = (FIELD_DIMS[name], arr, mesh_variable_attributes(name))
    for name, (dims, arr) in mesh.extra.items():
        data[name] = (tuple(dims), arr, mesh_variable_attributes(name))
    attrs = dict(mesh.attributes)
    attrs.update(sphere_radius=np.float64(mesh.sphere_radius), index_base=np.int32(1),
                 index_pad=np.int32(0), nCellsSolve=np.int64(mesh.nCellsSolve),
                 nEdgesSolve=np.int64(mesh.nEdgesSolve), nVerticesSolve=np.int64(mesh.nVerticesSolve))
    return xr.Dataset(data, attrs=attrs)


def from_xarray(ds: xr.Dataset, *, source: str = "<xarray>", sphere_radius: float | None = None,
                validate: bool = True, recompute_geometry: bool = False) -> Mesh:
    """Dataset -> Mesh.

    A Dataset with attribute index_base = 1 (as `to_xarray` writes) or without index_base (an MPAS
    file opened with xarray) is taken as 1-based with 0 pads and converted; index_base = 0 means
    0-based with -1 pads. A Dataset from `to_xarray` round-trips exactly (fields, extras, owned
    counts, and attributes, where the mesh's attributes["sphere_radius"] is set to its radius as
    every reader does; the convention attributes are dropped). Fields it lacks are derived
    (`grids.geometry.complete_mesh`); `sphere_radius`, `validate` and `recompute_geometry` act as
    in `grids.mpas_io.read_mesh`. Raises MeshError naming `source` and the field.
    """
    from .mpas_io import mesh_from_variables

    attrs = dict(ds.attrs)
    base = attrs.get("index_base")
    if base is not None and int(base) not in (0, 1):
        raise MeshError("unknown index base", file=source, field="index_base", value=base,
                        expected="0 (in-memory convention) or 1 (MPAS file)")
    zero_based = base is not None and int(base) == 0
    solve = {k: int(attrs[k]) for k in ("nCellsSolve", "nEdgesSolve", "nVerticesSolve") if k in attrs}
    if base is not None:
        for key in CONVENTION_ATTRS:
            if key != "sphere_radius":
                attrs.pop(key, None)
    variables = {name: (tuple(var.dims), np.asarray(var.values)) for name, var in ds.variables.items()}
    dims = {name: int(size) for name, size in ds.sizes.items()}
    mesh = mesh_from_variables(dims, variables, attrs, source=source, one_based=not zero_based,
                               sphere_radius=sphere_radius, validate=validate,
                               recompute_geometry=recompute_geometry)
    return mesh.replace(**solve) if solve else mesh
