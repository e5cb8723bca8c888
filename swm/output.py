"""History and restart files, written on rank 0 from gathered owned rows, one field at a time.

History: an MPAS mesh file (the mesh variables, 1-based) plus, per output time, the model fields
with MPAS names and dimensions (Time, nCells|nEdges|nVertices, nVertLevels), `xtime`
("YYYY-MM-DD_hh:mm:ss" from 0000-01-01) and the diagnostics time series (Time). It grows under
`<path>.partial` during the run and is renamed to `path` when the run ends, so a crash never leaves
a half-written file under the final name; a resumed run reopens the partial file and overwrites
the records from the restart time on.

Restart: h and u in the state's dtype, the step count and the time step, written to a temporary
file and renamed (atomic); a run resumed from it continues bitwise as the uninterrupted run.
"""
from __future__ import annotations

import os
import pathlib

import numpy as np

from grids.atomic import atomic_path

DIMENSION = {"cell": "nCells", "edge": "nEdges", "vertex": "nVertices"}
#: Location and units of each output variable.
VARIABLES = {"h": ("cell", "m"), "u": ("edge", "m s-1"), "vorticity": ("vertex", "s-1"),
             "divergence": ("cell", "s-1"), "ke": ("cell", "m2 s-2"), "b": ("cell", "m"),
             "uReconstructZonal": ("cell", "m s-1"), "uReconstructMeridional": ("cell", "m s-1")}


def xtime(seconds: float) -> str:
    """MPAS time stamp of `seconds` after 0000-01-01_00:00:00 (days counted past month ends as
    MPAS's shallow-water runs print them: day of year from 1)."""
    total = int(round(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"0000-01-{days + 1:02d}_{hours:02d}:{minutes:02d}:{secs:02d}" if days < 99 else \
        f"0000-{days + 1:05d}_{hours:02d}:{minutes:02d}:{secs:02d}"


def _string(text: str, width: int = 64) -> np.ndarray:
    return np.array(list(text.ljust(width)), dtype="S1")


def partial_path(path) -> pathlib.Path:
    path = pathlib.Path(path)
    return path.with_name(path.name + ".partial")


class History:
    """The history file on rank 0 (other ranks hold None and only take part in the gathers)."""

    def __init__(self, path, global_mesh, nlev: int, dtype, variables, diagnostics, *, resume=False):
        import netCDF4
        from grids.mpas_io import write_mesh

        self.path, self.partial = pathlib.Path(path), partial_path(path)
        self.variables = tuple(variables)
        if resume and self.partial.exists():
            self.ds = netCDF4.Dataset(self.partial, "a")
            return
        write_mesh(global_mesh, self.partial, format="NETCDF4")
        self.ds = ds = netCDF4.Dataset(self.partial, "a")
        ds.createDimension("nVertLevels", nlev)
        ds.createDimension("StrLen", 64)
        ds.createVariable("xtime", "S1", ("Time", "StrLen"))
        for name in self.variables:
            location, units = VARIABLES[name]
            var = ds.createVariable(name, np.dtype(dtype), ("Time", DIMENSION[location], "nVertLevels"))
            var.units = units
        for name in diagnostics:
            ds.createVariable(name, np.float64, ("Time",))

    def write(self, record: int, seconds: float, gather, fields: dict, diagnostics: dict) -> None:
        """Write output record `record`: gather(location, local) -> global array (rank 0);
        fields = {name: callable() -> local array} evaluated one at a time."""
        self.ds["xtime"][record] = _string(xtime(seconds))
        for name in self.variables:
            value = np.asarray(gather(VARIABLES[name][0], fields[name]()))
            self.ds[name][record] = value.reshape(value.shape[0], -1)
        for name, value in diagnostics.items():
            if name in self.ds.variables:
                self.ds[name][record] = value
        self.ds.sync()

    def close(self, finished: bool) -> None:
        """Close the file; rename it to its final name when the run finished."""
        self.ds.close()
        if finished:
            os.replace(self.partial, self.path)


def write_restart(path, h, u, step: int, dt: float, case: str) -> None:
    """Write the global state (rank 0) atomically: temporary file, fsync, rename."""
    import netCDF4

    with atomic_path(path) as tmp, netCDF4.Dataset(tmp, "w", format="NETCDF4") as ds:
        ds.createDimension("nCells", h.shape[0])
        ds.createDimension("nEdges", u.shape[0])
        ds.createDimension("nVertLevels", 1 if h.ndim == 1 else h.shape[1])
        ds.step, ds.dt, ds.case = np.int64(step), np.float64(dt), case
        for name, value, dim in (("h", h, "nCells"), ("u", u, "nEdges")):
            var = ds.createVariable(name, value.dtype, (dim, "nVertLevels"))
            var[:] = value.reshape(value.shape[0], -1)


def read_restart(path, *, n_cells: int, n_edges: int, dtype, case: str):
    """(h, u, step, dt) of a restart file, checked against the run's mesh, dtype and case."""
    import netCDF4

    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"restart.path = {str(path)!r}: no restart file to resume from")
    with netCDF4.Dataset(path) as ds:
        ds.set_auto_mask(False)
        found = {"nCells": len(ds.dimensions["nCells"]), "nEdges": len(ds.dimensions["nEdges"]),
                 "dtype": np.dtype(ds["h"].dtype).name, "case": str(ds.case)}
        expected = {"nCells": n_cells, "nEdges": n_edges, "dtype": np.dtype(dtype).name, "case": case}
        for key in expected:
            if found[key] != expected[key]:
                raise ValueError(f"{path}: restart {key} = {found[key]!r}, expected {expected[key]!r} "
                                 "(the run's config)")
        h, u = ds["h"][:], ds["u"][:]
        squeeze = (lambda a: a[:, 0]) if h.shape[1] == 1 else (lambda a: a)
        return squeeze(h), squeeze(u), int(ds.step), float(ds.dt)
