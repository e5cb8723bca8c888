"""Mesh <-> xarray.Dataset with MPAS dimension and variable names.

The Dataset holds the in-memory convention: 0-based indices with -1 pads (attributes
index_base = 0, index_pad = -1 say so), lengths in metres on a sphere of radius sphere_radius.
An MPAS file opened directly with xarray (1-based, 0 pads, no index_base attribute) is converted
by `grids.mpas_io` when read back with `from_xarray`.
"""
from __future__ import annotations

import numpy as np
import xarray as xr

from .mesh import FIELD_DIMS, Mesh
from .validate import MeshError

#: Dataset attributes describing the in-memory convention (not part of mesh.attributes).
CONVENTION_ATTRS = ("index_base", "index_pad", "sphere_radius", "nCellsSolve", "nEdgesSolve",
                    "nVerticesSolve")


def to_xarray(mesh: Mesh) -> xr.Dataset:
    """Mesh -> Dataset: every MPAS field and extra variable with its MPAS dims (arrays shared).

    Attributes: mesh.attributes, then sphere_radius, index_base = 0, index_pad = -1 and the owned
    counts nCellsSolve, nEdgesSolve, nVerticesSolve.
    """
    data = {name: (FIELD_DIMS[name], arr) for name, arr in mesh.fields().items()}
    for name, (dims, arr) in mesh.extra.items():
        data[name] = (tuple(dims), arr)
    attrs = dict(mesh.attributes)
    attrs.update(sphere_radius=np.float64(mesh.sphere_radius), index_base=np.int32(0),
                 index_pad=np.int32(-1), nCellsSolve=np.int64(mesh.nCellsSolve),
                 nEdgesSolve=np.int64(mesh.nEdgesSolve), nVerticesSolve=np.int64(mesh.nVerticesSolve))
    return xr.Dataset(data, attrs=attrs)


def from_xarray(ds: xr.Dataset, *, source: str = "<xarray>", sphere_radius: float | None = None,
                validate: bool = True, recompute_geometry: bool = False) -> Mesh:
    """Dataset -> Mesh.

    A Dataset with attribute index_base = 0 (as `to_xarray` writes) is taken as 0-based with -1
    pads and round-trips exactly (fields, extras, owned counts, and attributes, where the mesh's
    attributes["sphere_radius"] is set to its radius as every reader does). Without index_base it
    is taken as an MPAS file's content (1-based, 0 pads) and converted. Fields it lacks are derived
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
    if zero_based:
        for key in CONVENTION_ATTRS:
            if key != "sphere_radius":
                attrs.pop(key, None)
    variables = {name: (tuple(var.dims), np.asarray(var.values)) for name, var in ds.variables.items()}
    dims = {name: int(size) for name, size in ds.sizes.items()}
    mesh = mesh_from_variables(dims, variables, attrs, source=source, one_based=not zero_based,
                               sphere_radius=sphere_radius, validate=validate,
                               recompute_geometry=recompute_geometry)
    return mesh.replace(**solve) if solve else mesh
