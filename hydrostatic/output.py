"""The hydrostatic core's history: a netCDF-4 file with MPAS-Atmosphere names and units, written on
rank 0 from the gathered owned rows, under `<path>.partial` and renamed when the run finishes
(nothing half-written under the final name; a file the model did not write is never replaced:
`swm.output.claim`); a run stopped by a signal or an error keeps the records so far there
(`hydrostatic.callbacks.HistoryRecords`).

Contents: the mesh (or a reference to its grid file, `output.mesh`, as the shallow-water history:
`swm.output.create_mesh_part`), the terrain height `ter` (m, phi_s / g), the hybrid coefficients
`hyai` (Pa) and `hybi` at the interfaces (nVertLevelsP1, from the surface up), and per record the
fields of `hydrostatic.variables.FIELDS` asked for (dimensions Time, nCells | nEdges,
nVertLevels | nVertLevelsP1), `Time` (CF units), `xtime` and the diagnostics' time series.
"""
from __future__ import annotations

import os

import numpy as np

import meshops
from meshops.parallel.comm import allreduce_sum
from swm.output import create_mesh_part, create_time, partial_path, set_time

from hydrostatic.dynamics import column_diagnostics
from hydrostatic.variables import DIAGNOSTICS, FIELDS


def fields_of(model, names) -> dict:
    """{name: local field} of the model's state (halo rows valid: exchange it first)."""
    m = model.device_mesh
    d = column_diagnostics(m, model.mass, model.theta_mass, model.phi_s, model.physics)
    out = {}
    temperature = d["theta"] * meshops.exner(m, d["p"])
    if "uReconstructZonal" in names or "uReconstructMeridional" in names:
        zonal, meridional = meshops.reconstruct_zonal_meridional_e2c(m, model.u)
        out["uReconstructZonal"], out["uReconstructMeridional"] = zonal, meridional
    out.update(theta=d["theta"], temperature=temperature, pressure=d["p"],
               surface_pressure=d["p_i"][:, 0], u=model.u, zgrid=d["phi_i"] / model.physics.gravity,
               temperature_850hPa=meshops.interp_level_l2p(m, d["p"], temperature))
    return {name: out[name] for name in names}


def diagnostics_of(model, distribution) -> dict:
    """{name: value} of `hydrostatic.variables.DIAGNOSTICS`: each entry's partial over the owned
    rows, summed over the ranks."""
    total = allreduce_sum(distribution.comm)
    return {name: total(d.partial(model, distribution.owned)) for name, d in DIAGNOSTICS.items()}


class History:
    """The history on rank 0: `global_mesh`, the claimed `swm.output.OutputFile` `target`, the
    field names, the state's dtype, level count, coefficients (A, B), terrain phi_s / g,
    provenance `attributes` and the grid reference `grid` (None: the mesh inside)."""

    def __init__(self, target, global_mesh, variables, dtype, nlev, A, B, terrain, attributes,
                 grid=None):
        self.path, self.partial = target.path, partial_path(target.path)
        self.variables = tuple(variables)
        if self.partial.exists():
            self.partial.unlink()
        try:
            self.ds = ds = create_mesh_part(self.partial, global_mesh, grid, attributes, self.path)
            ds.setncatts({"core_name": "atmosphere"})
            ds.createDimension("nVertLevels", nlev)
            ds.createDimension("nVertLevelsP1", nlev + 1)
            create_time(ds)
            for name, value, dims, units, long_name in (
                    ("ter", terrain, ("nCells",), "m", "terrain height (surface geopotential / g)"),
                    ("hyai", A, ("nVertLevelsP1",), "Pa", "hybrid A: p = hyai + hybi * p_s"),
                    ("hybi", B, ("nVertLevelsP1",), "1", "hybrid B: p = hyai + hybi * p_s")):
                var = ds.createVariable(name, np.float64, dims)
                var.setncatts({"units": units, "long_name": long_name})
                var[:] = value
            for name in self.variables:
                dims, units, long_name = FIELDS[name]
                var = ds.createVariable(name, np.dtype(dtype), ("Time",) + dims)
                var.setncatts({"units": units, "long_name": long_name})
            for name, d in DIAGNOSTICS.items():
                ds.createVariable(name, np.float64, ("Time",)).setncatts(
                    {"units": d.units, "long_name": d.long_name})
        except BaseException:
            self.close(finished=False)
            raise

    def write(self, record: int, seconds: float, fields: dict, diagnostics: dict) -> None:
        set_time(self.ds, record, seconds)
        for name in self.variables:
            self.ds[name][record] = fields[name]
        for name, value in diagnostics.items():
            self.ds[name][record] = value
        self.ds.sync()

    def close(self, finished: bool, discard: bool = True) -> None:
        """Close the file: renamed to its final name when the run finished; else removed with
        `discard`, kept as the partial file (the records so far) without."""
        if getattr(self, "ds", None) is not None and self.ds.isopen():
            self.ds.close()
        if finished:
            os.replace(self.partial, self.path)
        elif discard:
            self.partial.unlink(missing_ok=True)
