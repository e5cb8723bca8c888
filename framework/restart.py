"""The restart file every model writes and resumes from (the model names its state's fields).

Restart: the state's fields (h and u; the hydrostatic core's mass, theta_mass and u) in its dtype,
its time (`Time`, `xtime`), the step count, dt, and the fingerprints of the mesh and of every
setting that changes the trajectory, checked when a run resumes from it; the mesh settings and the
fingerprint of the set of cells (`cells_fingerprint`) name the setting that differs (e.g. the cell
order) when the mesh is not the run's.
"""
from __future__ import annotations

import json
import pathlib

import numpy as np

from grids.atomic import atomic_path
from grids.netcdf_files import dataset
from meshops.device.tables import SIZE_OF
from framework.dates import START, xtime
from framework.mesh_files import fingerprint_attributes
from framework.output import MODEL_NAME, OutputError, create_time, reporting_space, set_time, stamp

# -- restart --------------------------------------------------------------------------------------

def _another_mesh(ds, fingerprint: dict) -> str:
    """Why restart `ds` (open) is not of the run's mesh: the mesh settings that differ (restart vs
    config), and whether it holds the same cells in another order (`cells_fingerprint`)."""
    stored = json.loads(getattr(ds, "mesh_settings", "null") or "null")
    given = fingerprint.get("mesh_settings") or {}
    differ = [] if stored is None else \
        [k for k in {**stored, **given} if stored.get(k) != given.get(k)]
    said = ", ".join(f"{k} = {stored.get(k)!r} in the restart, {given.get(k)!r} in the config"
                     for k in differ)
    if getattr(ds, "mesh_cells_fingerprint", None) == fingerprint.get("cells"):
        return (f"written on the same cells in another order ({said or 'another cell order'}); "
                "expected the restart's cell order" +
                (f" ({', '.join(f'{k} = {stored.get(k)!r}' for k in differ)})" if differ else ""))
    if differ:
        return (f"written on another mesh ({said}); expected a restart of this mesh (the "
                "restart's mesh settings)")
    return (f"written on another mesh (fingerprint {ds.mesh_fingerprint}, this config's mesh "
            f"{fingerprint['mesh']}); expected a restart of this mesh (same mesh.generate or "
            "mesh.file)")


#: What each core of this package calls itself in its files (`core_name`, MPAS's attribute).
CORES = {"sw": "the shallow-water model", "atmosphere": "the hydrostatic core"}


def _kind_of(ds) -> str:
    """' (it is ...)': what file `ds` (open) is when it is not the restart a run expects: a
    restart of a core (its core_name and state variables), a history (a Time dimension without
    a restart's step), or nothing said."""
    attributes = set(ds.ncattrs())
    if getattr(ds, "model_name", None) == MODEL_NAME and {"step", "dt"} <= attributes:
        core = str(getattr(ds, "core_name", "sw"))
        fields = ", ".join(n for n in ds.variables if n not in ("Time", "xtime"))
        return f" (it is a restart of {CORES.get(core, core)}, core_name = {core!r}: {fields})"
    if "Time" in ds.dimensions:
        return " (it is a history file: records along Time, no restart step)"
    return ""


def write_restart(path, fields: dict, step: int, dt: float, fingerprint: dict,
                  attributes: dict | None = None, start: str = START) -> None:
    """Write the global state (rank 0) atomically: temporary file, fsync, rename. `fields`: {name:
    (array (rows[, levels]), location, variable attributes)} in the state's dtype, each stored
    as (nCells | nEdges, nVertLevels); `attributes`: `provenance`'s; `start`: the run's start
    date (`framework.dates`), of its Time's units and xtime."""
    with reporting_space(path, "restart.path", kept="the restart file there is kept as it was"), \
            atomic_path(path) as tmp, dataset(tmp, "w", format="NETCDF4") as ds:
        for value, location, _ in fields.values():
            if SIZE_OF[location] not in ds.dimensions:
                ds.createDimension(SIZE_OF[location], value.shape[0])
        first = next(iter(fields.values()))[0]
        ds.createDimension("nVertLevels", 1 if first.ndim == 1 else first.shape[1])
        stamp(ds, attributes)
        ds.setncatts({"step": np.int64(step), "dt": np.float64(dt),
                      "xtime": xtime(step * dt, start), **fingerprint_attributes(fingerprint)})
        if "cells" in fingerprint:          # named when a resume finds another mesh
            ds.setncatts({"mesh_cells_fingerprint": fingerprint["cells"],
                          "mesh_settings": json.dumps(fingerprint["mesh_settings"])})
        create_time(ds, start)
        set_time(ds, 0, step * dt, start)
        for name, (value, location, var_attributes) in fields.items():
            var = ds.createVariable(name, value.dtype, (SIZE_OF[location], "nVertLevels"))
            var.setncatts(var_attributes)
            var[:] = value.reshape(value.shape[0], -1)


def read_restart(path, *, locations: dict, sizes: dict, dtype, fingerprint: dict,
                 levels: int | None = None) -> tuple[dict, int]:
    """({name: global array}, step) of the state fields `locations` ({name: location}) of a
    restart file, checked against the run's mesh (`sizes`: {dimension: size}), dtype, levels and
    settings. `levels` None: a one-level state, returned as vectors; else the nVertLevels
    expected, the arrays (rows, levels)."""
    import netCDF4

    path = pathlib.Path(path)
    where = f"restart.path = {str(path)!r}"
    if not path.is_file():
        raise OutputError(f"{where}: no restart file to resume from")
    try:
        ds = netCDF4.Dataset(path)
    except OSError as exc:
        raise OutputError(f"{where}: not a readable netCDF file ({exc})") from None
    with ds:
        ds.set_auto_mask(False)
        attributes = set(ds.ncattrs())
        if getattr(ds, "model_name", None) != MODEL_NAME \
                or not set(locations) <= set(ds.variables) \
                or not {"step", "dt", "mesh_fingerprint", "trajectory_settings"} <= attributes \
                or not set(sizes) | {"nVertLevels"} <= set(ds.dimensions):
            raise OutputError(f"{where}: not a restart file of this model{_kind_of(ds)} (a "
                              f"restart of it holds {', '.join(locations)}); expected the "
                              "restart.path of the run being resumed")
        expected = {**sizes, "nVertLevels": 1 if levels is None else levels,
                    "dtype": np.dtype(dtype).name}
        found = {key: len(ds.dimensions[key]) for key in expected if key != "dtype"}
        found["dtype"] = np.dtype(ds[next(iter(locations))].dtype).name
        for key in expected:
            if found[key] != expected[key]:
                raise OutputError(f"{where}: restart {key} = {found[key]!r}, expected "
                                  f"{expected[key]!r} (the run's config)")
        if ds.mesh_fingerprint != fingerprint["mesh"]:
            raise OutputError(f"{where}: {_another_mesh(ds, fingerprint)}")
        settings = json.loads(ds.trajectory_settings)
        for key, value in fingerprint["settings"].items():
            if settings.get(key) != value:
                found = settings[key] if key in settings else "unset (its default)"
                raise OutputError(f"{where}: written with {key} = {found}, the config gives "
                                  f"{value}; expected the settings of the run being resumed")
        state = {name: ds[name][:] for name in locations}
        if levels is None:
            state = {name: value[:, 0] for name, value in state.items()}
        return state, int(ds.step)
