"""Meshes: MPAS netCDF I/O, validation, geometry, icosahedral generation, reordering.

Public names: Mesh, read_mesh, write_mesh, validate_mesh, MeshError, generate_icosahedral,
write_icosahedral, cached_icosahedral, complete_mesh, reorder_mesh, to_xarray, from_xarray. The last
seven are imported from their modules on first use (xarray is only imported by to_xarray / from_xarray). `grids.mesh`
imports no other module of the package, so the modules form no import cycle.
"""
import importlib.metadata as _metadata

from .mesh import EARTH_OMEGA, EARTH_RADIUS, Mesh
from .mpas_io import read_mesh, write_mesh
from .validate import MeshError, validate_mesh

try:
    __version__ = _metadata.version("meshops")      # the distribution of grids, meshops, swm, adjoint
except _metadata.PackageNotFoundError:  # a source tree that is not installed
    __version__ = "unknown"

_LAZY = {"generate_icosahedral": "icosahedral", "write_icosahedral": "icosahedral",
         "cached_icosahedral": "cache",
         "complete_mesh": "geometry",
         "reorder_mesh": "reorder", "to_xarray": "xarray_io", "from_xarray": "xarray_io"}

__all__ = ["Mesh", "read_mesh", "write_mesh", "validate_mesh", "MeshError",
           "generate_icosahedral", "write_icosahedral", "cached_icosahedral", "complete_mesh",
           "reorder_mesh", "to_xarray", "from_xarray", "EARTH_RADIUS", "EARTH_OMEGA"]


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
