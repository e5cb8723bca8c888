"""The hydrostatic core's history: a netCDF-4 file with MPAS-Atmosphere names and units, written on
rank 0 from the gathered owned rows by the run's writer thread: `framework.history.History` (its
partial file, the claim of its path, the continuation by a resumed run, a full disk as one line)
with this core's contents.

Contents: the mesh (or a reference to its grid file, `output.mesh`, as the shallow-water history:
`framework.mesh_files.create_mesh_part`), the terrain height `ter` (m, phi_s / g), the hybrid
coefficients `hyai` (Pa) and `hybi` at the interfaces (nVertLevelsP1, from the surface up), and per
record the fields of `hydrostatic.variables.FIELDS` asked for (dimensions Time, nCells | nEdges,
nVertLevels | nVertLevelsP1), `Time` (CF units), `xtime` and the diagnostics' time series; the
fingerprints a resumed run checks (`mesh_fingerprint`, `trajectory_settings`). The restart file is
`framework.restart.write_restart`'s with the state of `hydrostatic.variables.STATE`.
"""
from __future__ import annotations

import numpy as np

import meshops
from framework.dates import START
from framework import history
from framework.mesh_files import (cells_fingerprint, mesh_fingerprint, mesh_settings,
                                  trajectory_settings)

from hydrostatic.dynamics import column_diagnostics
from hydrostatic.levels import LEVEL_SETS
from hydrostatic.variables import DIAGNOSTICS, FIELDS, ISOBARIC

#: The hydrostatic core's `core_name` in its files (MPAS-Atmosphere's).
CORE_NAME = "atmosphere"


def fields_of(model, names) -> dict:
    """{name: local field} of the model's state (halo rows valid: exchange it first). The
    pressure-level fields (`hydrostatic.variables.ISOBARIC`) are their layer quantity interpolated
    to the level, linear in log p (`meshops.interp_level_l2p`, the layer pressure `pressure`)."""
    m = model.device_mesh
    d = column_diagnostics(m, model.mass, model.theta_mass, model.phi_s, model.physics)
    out = {}
    temperature = d["theta"] * meshops.exner(m, d["p"])
    quantities = {ISOBARIC[name][0] for name in names if name in ISOBARIC}
    if {"uzonal", "umeridional"} & quantities or \
            {"uReconstructZonal", "uReconstructMeridional"} & set(names):
        zonal, meridional = meshops.reconstruct_zonal_meridional_e2c(m, model.u)
        out["uReconstructZonal"], out["uReconstructMeridional"] = zonal, meridional
    out.update(theta=d["theta"], temperature=temperature, pressure=d["p"],
               surface_pressure=d["p_i"][:, 0], u=model.u, zgrid=d["phi_i"] / model.physics.gravity)
    layers = {"uzonal": lambda: out["uReconstructZonal"],
              "umeridional": lambda: out["uReconstructMeridional"],
              "temperature": lambda: temperature,
              "height": lambda: meshops.avg_i2l(m, out["zgrid"])}
    on_layers = {q: layers[q]() for q in quantities}
    for name in names:
        if name in ISOBARIC:
            quantity, p_level = ISOBARIC[name]
            out[name] = meshops.interp_level_l2p(m, d["p"], on_layers[quantity], p_level=p_level)
    return {name: out[name] for name in names}


def diagnostics_of(model, distribution) -> dict:
    """{name: value} of `hydrostatic.variables.DIAGNOSTICS` (every rank): each entry's column
    values gathered in global cell order and summed on rank 0, so that it is bitwise the same on
    any number of ranks."""
    values = {}
    for name, d in DIAGNOSTICS.items():
        columns = distribution.gather("cell", d.columns(model))
        values[name] = distribution.comm.bcast(None if columns is None else float(columns.sum()),
                                               root=0)
    return values


def fingerprint(config, mesh, dt: float) -> dict:
    """The run's fingerprint (`framework.mesh_files`): the mesh's, the settings that change the
    trajectory (the shallow-water model's keys with vertical.levels, case.rotation,
    dynamics.kinetic_energy, time.start and a generated scheme's vertical.nVertLevels and top_pa)
    and what names another cell order."""
    settings = {**trajectory_settings(config, dt), "vertical.levels": config.vertical.levels,
                # settings at their defaults are left out: restarts written before they existed resume
                "case": config.case.model_dump(mode="json", exclude_defaults=True)}
    if config.time.start != START:      # the date of the history's and restart's times
        settings["time.start"] = config.time.start
    if config.vertical.levels not in LEVEL_SETS:        # a generated scheme: its count and top
        settings.update({"vertical.nVertLevels": config.vertical.nVertLevels,
                         "vertical.top_pa": config.vertical.top_pa})
    if config.dynamics.kinetic_energy != "trisk":
        settings["dynamics.kinetic_energy"] = config.dynamics.kinetic_energy
    return {"mesh": mesh_fingerprint(mesh), "settings": settings,
            "cells": cells_fingerprint(mesh), "mesh_settings": mesh_settings(config)}


class History(history.History):
    """The history on rank 0 (`framework.history.History`: grows under NAME.partial on the writer
    thread, continued by a resumed run, a full disk one line that keeps the previous file): a
    new one holds `hyai`, `hybi` (`coefficients` (A, B)), the terrain `ter` (phi_s / g) and the
    fields of `variables` and DIAGNOSTICS."""

    core_name = CORE_NAME

    def __init__(self, target, writer, global_mesh, dtype, variables, nlev: int, coefficients,
                 terrain, *, fingerprint: dict, attributes: dict, grid=None, resume_time=None,
                 start: str = START):
        self.coefficients = coefficients
        super().__init__(target, writer, global_mesh, dtype, variables, tuple(DIAGNOSTICS),
                         fingerprint=fingerprint, resume_time=resume_time, nlev=nlev,
                         topography=terrain, attributes=attributes, grid=grid, start=start)

    def _contents(self, ds, dtype, nlev, terrain) -> None:
        A, B = self.coefficients
        ds.createDimension("nVertLevelsP1", nlev + 1)
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
