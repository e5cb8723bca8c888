"""The mesh of the files a run writes: the fingerprints of a mesh and of the settings that change
a trajectory (checked when a run resumes), the mesh inside a file or a reference to its grid
file, and either form read back (`open_history`).

Mesh (`output.mesh`): a history holds the mesh (`inside`, MPAS's sw output stream with its mesh
stream) or references an MPAS grid file (`reference`); `auto` references it above
MESH_INSIDE_MAX_CELLS cells. A referencing history holds the fields, h_s, the time and diagnostics,
latCell and lonCell, and the grid file's path (`mesh_file`, absolute; `mesh_file_relative`, from the
history's folder), its fingerprint (`mesh_file_fingerprint`, `stored_fingerprint`) and its
`file_id` as MPAS's `parent_id`. `open_history` reads either form as one xarray Dataset;
UXarray reads it as `uxarray.open_dataset(grid, history)`.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import pathlib
import time
from dataclasses import dataclass

import numpy as np

from framework.config import MESH_INSIDE_MAX_CELLS
from framework.files import beside_grid_path
from framework.output import OutputError, reporting_space, stamp

log = logging.getLogger("framework")


# -- fingerprints -----------------------------------------------------------------------------------

def mesh_fingerprint(mesh) -> str:
    """BLAKE2b (16 hex digits) of the mesh's cell positions, edges and metric terms: another
    order, Lloyd count, radius or file gives another fingerprint."""
    digest = hashlib.blake2b(digest_size=8)
    for name in ("xCell", "yCell", "zCell", "cellsOnEdge", "dcEdge", "areaCell"):
        digest.update(np.ascontiguousarray(getattr(mesh, name)).view(np.uint8))
    return digest.hexdigest()


def cells_fingerprint(mesh) -> str:
    """BLAKE2b (16 hex digits) of the set of cell positions (sorted, so the same in any cell
    order): a mesh with another `mesh_fingerprint` but this one holds the same cells in another
    order."""
    xyz = np.stack([np.asarray(getattr(mesh, n), dtype="<f8") for n in ("xCell", "yCell", "zCell")],
                   axis=1)
    xyz = xyz[np.lexsort(xyz.T[::-1])]
    return hashlib.blake2b(np.ascontiguousarray(xyz).view(np.uint8), digest_size=8).hexdigest()


def mesh_settings(config) -> dict:
    """The config keys that make the mesh, with their values (a restart names the one that differs
    when its mesh is not the run's)."""
    m = config.mesh
    out = {"mesh.radius": m.radius}
    if m.generate is not None:
        out.update({f"mesh.generate.{k}": v for k, v in m.generate.model_dump(mode="json").items()})
    else:
        out.update({"mesh.file": str(m.file), "mesh.recompute_geometry": m.recompute_geometry})
    return out


def trajectory_settings(config, dt: float) -> dict:
    """Every setting besides the mesh that changes the trajectory (config keys -> values)."""
    return {"case": config.case.model_dump(mode="json"), "time.dt": dt, "dtype": config.dtype,
            "diffusion": config.diffusion.model_dump(mode="json"), "mesh.radius": config.mesh.radius}


# -- the mesh of an output file: inside it, or a referenced grid file -----------------------------

#: The arrays `stored_fingerprint` hashes (those of `mesh_fingerprint`).
FINGERPRINT_ARRAYS = ("xCell", "yCell", "zCell", "cellsOnEdge", "dcEdge", "areaCell")
#: Global attributes of a referencing file that name its grid file.
REFERENCE_ATTRIBUTES = ("mesh_file", "mesh_file_relative", "mesh_file_fingerprint")


class MeshReferenceError(OutputError):
    """A referenced grid file that is missing or holds another mesh; the message names both files."""


def mesh_form(setting: str, n_cells: int) -> str:
    """The form of an output file's mesh for `output.mesh` = `setting`: "inside" or "reference"
    ("auto": reference above MESH_INSIDE_MAX_CELLS cells)."""
    if setting == "auto":
        return "reference" if n_cells > MESH_INSIDE_MAX_CELLS else "inside"
    return setting


def stored_fingerprint(mesh) -> str:
    """BLAKE2b (16 hex digits) of `mesh`'s FINGERPRINT_ARRAYS as an MPAS grid file stores them
    (floats as little-endian float64, cellsOnEdge 1-based int32): equal to `grid_file_identity`'s
    of a grid file that holds this mesh as written by `grids.mpas_io.write_mesh`."""
    return _stored_digest({n: getattr(mesh, n) for n in FINGERPRINT_ARRAYS}, one_based=False)


def _stored_digest(arrays: dict, one_based: bool) -> str:
    digest = hashlib.blake2b(digest_size=8)
    for name in FINGERPRINT_ARRAYS:
        value = np.asarray(arrays[name])
        if name == "cellsOnEdge":
            value = value.astype("<i4") + (0 if one_based else 1)
        digest.update(np.ascontiguousarray(value, dtype="<i4" if name == "cellsOnEdge" else "<f8")
                      .view(np.uint8))
    return digest.hexdigest()


def grid_file_identity(path) -> tuple[str, dict]:
    """(stored_fingerprint, {file_id, parent_id}) of MPAS grid file `path`; MeshReferenceError
    when it cannot be read or is not a grid file."""
    import netCDF4

    try:
        with netCDF4.Dataset(path) as ds:
            ds.set_auto_mask(False)
            missing = [n for n in FINGERPRINT_ARRAYS if n not in ds.variables]
            if missing:
                raise MeshReferenceError(f"{path}: not an MPAS grid file (no {', '.join(missing)})")
            ids = {k: str(getattr(ds, k, "")) for k in ("file_id", "parent_id")}
            return _stored_digest({n: ds[n][:] for n in FINGERPRINT_ARRAYS}, True), ids
    except OSError as exc:
        raise MeshReferenceError(f"{path}: not a readable netCDF file ({exc})") from None


@dataclass(frozen=True)
class GridReference:
    """The MPAS grid file an output file references: its absolute path, `stored_fingerprint`,
    file_id and parent_id."""
    path: pathlib.Path
    fingerprint: str
    file_id: str = ""
    parent_id: str = ""

    @classmethod
    def of(cls, path) -> "GridReference":
        fingerprint, ids = grid_file_identity(path)
        return cls(pathlib.Path(path).resolve(), fingerprint, ids["file_id"], ids["parent_id"])

    def attributes(self, output) -> dict:
        """The global attributes of `output` (a path) that reference this grid file: mesh_file,
        mesh_file_relative, mesh_file_fingerprint, and MPAS's lineage: a new file_id and parent_id
        = the grid's file_id (its own parent_id on the following lines)."""
        from grids.mpas_io import new_file_id

        folder = pathlib.Path(output).resolve().parent
        parent = "\n".join(x for x in (self.file_id.strip(), self.parent_id.strip()) if x)
        return {"mesh_file": str(self.path),
                "mesh_file_relative": os.path.relpath(self.path, folder),
                "mesh_file_fingerprint": self.fingerprint,
                "file_id": new_file_id(), "parent_id": parent}


def reference_grid(mesh, output, candidate=None, *, trusted: bool = False,
                   key: str = "output.path") -> GridReference:
    """The grid file that `output` (written under config key `key`) references for `mesh` (rank 0):
    `candidate` when it holds `mesh` as stored (or is `trusted`: the user's mesh.file, which the mesh
    was read from), else NAME.grid.nc beside `output`, written once (NETCDF4, atomically) and
    reused while it holds `mesh`; a file there with another mesh is refused, naming both."""
    from grids.mpas_io import write_mesh

    expected = stored_fingerprint(mesh)
    if candidate is not None and pathlib.Path(candidate).is_file():
        try:
            found = GridReference.of(candidate)
        except MeshReferenceError as exc:
            log.warning("mesh: %s cannot be referenced (%s)", candidate, exc)
        else:
            if trusted or found.fingerprint == expected:
                return found
            log.warning("mesh: %s holds another mesh (fingerprint %s, the run's %s)", candidate,
                        found.fingerprint, expected)
    beside = beside_grid_path(output)
    if beside.exists():
        found = GridReference.of(beside)
        if found.fingerprint != expected:
            raise MeshReferenceError(
                f"{key} = {str(output)!r}: its grid file {str(beside)!r} holds another mesh "
                f"(fingerprint {found.fingerprint}, this run's {expected}); expected the grid file "
                "of this run's mesh (remove it, or choose another output path or output.mesh: "
                "inside)")
        return found
    t0 = time.perf_counter()
    with reporting_space(beside, key, output):
        write_mesh(mesh, beside, format="NETCDF4",
                   history=f"grid file of {pathlib.Path(output).name}")
    log.info("mesh: wrote the grid file %s in %.1f s", beside,
             time.perf_counter() - t0)
    return GridReference.of(beside)


def create_mesh_part(path, mesh, grid: GridReference | None, attributes: dict | None,
                     output=None):
    """A new netCDF-4 file at `path`, open for appending, with the mesh part of an output file:
    the whole mesh (`grid` None), or the dimensions, latCell and lonCell, the mesh's global
    attributes and the reference to `grid` (its relative path taken from `output`, default `path`);
    `provenance`'s `attributes` stamped on either."""
    import netCDF4
    from grids.mpas_io import file_attributes, mesh_variable_attributes, write_mesh

    if grid is None:
        write_mesh(mesh, path, format="NETCDF4")
        ds = netCDF4.Dataset(path, "a")
    else:
        ds = netCDF4.Dataset(path, "w", format="NETCDF4")
        kept = {k: v for k, v in file_attributes(mesh).items()
                if not k.startswith("meshops_cache_") and k not in ("file_id", "parent_id")}
        ds.setncatts({k: (np.int32(v) if isinstance(v, (bool, np.bool_)) else v)
                      for k, v in kept.items()})
        ds.setncatts(grid.attributes(output if output is not None else path))
        for dim, n in (("nCells", mesh.nCells), ("nEdges", mesh.nEdges),
                       ("nVertices", mesh.nVertices)):
            ds.createDimension(dim, n)
        for name in ("latCell", "lonCell"):
            var = ds.createVariable(name, np.float64, ("nCells",))
            var.setncatts(mesh_variable_attributes(name))
            var[:] = getattr(mesh, name)
    ds.set_auto_mask(False)
    stamp(ds, attributes)
    return ds


def find_grid(path, attributes: dict, grid=None) -> pathlib.Path:
    """The grid file of referencing output file `path` (global `attributes`): `grid` when given,
    else mesh_file_relative (from the file's folder), else mesh_file; the first that holds the
    referenced mesh. MeshReferenceError names the file and the grid file(s) when none does."""
    path = pathlib.Path(path)
    if grid is not None:
        candidates = [pathlib.Path(grid)]
    else:
        candidates = [path.resolve().parent / attributes["mesh_file_relative"],
                      pathlib.Path(attributes["mesh_file"])]
    expected = attributes["mesh_file_fingerprint"]
    problems = []
    for candidate in dict.fromkeys(c.resolve() for c in candidates):
        if not candidate.is_file():
            problems.append(f"{candidate} does not exist")
            continue
        try:
            found, _ = grid_file_identity(candidate)
        except MeshReferenceError as exc:
            problems.append(str(exc))
            continue
        if found == expected:
            return candidate
        problems.append(f"{candidate} holds another mesh (fingerprint {found}, the file's "
                        f"mesh_file_fingerprint {expected})")
    raise MeshReferenceError(
        f"{path}: references the grid file {attributes['mesh_file']}, but {'; '.join(problems)}; "
        "expected the MPAS grid file of the run that wrote it (pass it as grid=, or "
        "python -m swm.plot --grid; a generated mesh is written again to the cache by a run of "
        "the same mesh.generate)")


def history_mesh(path, grid=None):
    """The `grids.Mesh` of an output file of the model: the mesh inside it, or its referenced
    grid file's (`find_grid`) at the file's sphere_radius."""
    import netCDF4
    from grids.mpas_io import read_mesh

    with netCDF4.Dataset(path) as ds:
        attributes = {k: ds.getncattr(k) for k in ds.ncattrs()}
    if "mesh_file_fingerprint" not in attributes:
        return read_mesh(path)
    return read_mesh(find_grid(path, attributes, grid),
                     sphere_radius=float(attributes["sphere_radius"]))


def open_history(path, grid=None, **kwargs):
    """An output file of the model (history, gradient file) as an xarray Dataset with the mesh
    variables in it, whether the file holds the mesh or references a grid file (`find_grid`;
    `grid` overrides the recorded path). The grid's lengths and areas are scaled to the file's
    sphere_radius. `kwargs` go to `xarray.open_dataset`; closing the Dataset closes both files."""
    import xarray
    from grids.mpas_io import SCALED_AREAS, SCALED_LENGTHS

    ds = xarray.open_dataset(path, **kwargs)
    if "mesh_file_fingerprint" not in ds.attrs:
        return ds
    try:
        grid_path = find_grid(path, ds.attrs, grid)
        mesh = xarray.open_dataset(grid_path, **kwargs)
    except BaseException:
        ds.close()
        raise
    position = [float(mesh[name][0]) for name in ("xCell", "yCell", "zCell")]
    radius = float(mesh.attrs.get("sphere_radius", np.linalg.norm(position)))
    scale = float(ds.attrs.get("sphere_radius", radius)) / radius
    merged = ds.copy()
    for name, variable in mesh.variables.items():
        if name in ds.variables or "Time" in variable.dims:
            continue
        if scale != 1.0 and name in SCALED_LENGTHS + SCALED_AREAS:
            factor = scale ** (2 if name in SCALED_AREAS else 1)
            variable = variable.copy(data=variable.values * factor)
        merged[name] = variable
    merged.set_close(lambda: (ds.close(), mesh.close()))
    return merged


def fingerprint_attributes(fingerprint: dict) -> dict:
    """The global attributes of a run's `fingerprint` in its history and restart files."""
    return {"mesh_fingerprint": fingerprint["mesh"],
            "trajectory_settings": json.dumps(fingerprint["settings"], sort_keys=True)}
