"""PNG maps of a history file or of a gradient file written by run_model.py.

Of a history file: the surface height h + h_s (h where there is no topography) and the vorticity
on the cells' polygons (longitude-latitude), and for Williamson case 2 the error of h against the
analytic solution; of a gradient file (a sensitivity run), the gradients' maps. A file that
references its grid file (`output.mesh`) is read with it (`framework.mesh_files.open_history`).

    python -m swm.plot williamson5.nc [--record -1] [--out DIR] [--grid GRID]
"""
from __future__ import annotations

import pathlib
import sys

import numpy as np

from framework.mesh_files import open_history
from framework.plot import (PlotError, check_core, command, draw_map, map_geometry, map_targets,
                            open_map_file)
from swm.output import CORE_NAME
from swm.variables import FIELDS

#: The mesh variables a map of a history needs.
MAP_MESH = ("nEdgesOnCell", "verticesOnCell", "lonVertex", "latVertex", "lonCell", "latCell",
            "cellsOnVertex", "kiteAreasOnVertex", "areaCell")


def cell_vorticity(ds, vorticity_vertex):
    """Kite-area weighted mean of the vertex vorticity on each cell (interp_v2c)."""
    cov = np.asarray(ds["cellsOnVertex"]).astype(int) - 1
    kites = np.asarray(ds["kiteAreasOnVertex"])
    area = np.asarray(ds["areaCell"])
    vorticity_vertex = np.asarray(vorticity_vertex)
    out = np.zeros(area.size)
    for j in range(cov.shape[1]):
        valid = cov[:, j] >= 0
        np.add.at(out, cov[valid, j], kites[valid, j] * vorticity_vertex[valid])
    return out / area


def plot_gradients(path, out_dir=None, grid=None) -> list[pathlib.Path]:
    """PNG maps of a gradient file (`run_model.py` with a sensitivity section): dJ/dh0 and dJ/db
    on cells, and for dJ/du0 the mean of |dJ/du0| over each cell's edges; `grid`: its grid file
    where it references one elsewhere than recorded."""
    path = pathlib.Path(path)
    out_dir = pathlib.Path(out_dir) if out_dir is not None else path.parent
    written = []
    with open_history(path, grid, decode_times=False) as ds:
        geometry = map_geometry(ds)
        maps = {}
        for name in ("dJdh0", "dJdb"):
            if name in ds.variables:
                var = ds[name]
                maps[name] = (var.values[0, :, 0], f"{var.attrs['long_name']} ({var.attrs['units']})",
                              "RdBu_r")
        if "dJdu0" in ds.variables:
            n = ds["nEdgesOnCell"].values.astype(int)
            eoc = ds["edgesOnCell"].values.astype(int) - 1
            magnitude = np.abs(ds["dJdu0"].values[0, :, 0])
            slots = np.arange(eoc.shape[1]) < n[:, None]
            mean = np.where(slots, magnitude[np.maximum(eoc, 0)], 0.0).sum(axis=1) / n
            maps["dJdu0"] = (mean, f"|dJ/du0|, mean over the cell's edges "
                             f"({ds['dJdu0'].attrs['units']})", "viridis")
        cost = float(ds["J"].values[0])
        targets = map_targets(path, maps, out_dir)
        for name, (values, label, cmap) in maps.items():
            target = targets[name]
            draw_map(geometry, values, cmap, f"{path.name} (J = {cost:.6g}): {label}", target)
            written.append(target)
    return written


def plot_file(path, record: int = -1, out_dir=None, grid=None) -> list[pathlib.Path]:
    """Write PNG maps of `record` of history file `path`; returns their paths. `grid`: the grid
    file of a history that references one elsewhere than recorded. PlotError names an output
    directory that is missing, a record past the end, a file with no model output, or a
    referenced grid file that is missing or another mesh."""
    path = pathlib.Path(path)
    written = []
    expected = "expected a history file written by run_model.py, or a gradient file"
    ds, out_dir = open_map_file(path, grid, out_dir, expected)
    with ds:
        check_core(ds, path, CORE_NAME)
        if "J" in ds.variables:            # a gradient file (it has Time and xtime too)
            return plot_gradients(path, out_dir, grid)
        if "xtime" not in ds.variables or "h" not in ds.variables:
            raise PlotError(f"{path}: no xtime or no h (a mesh file?); {expected}")
        missing = [n for n in MAP_MESH if n not in ds.variables]
        if missing:
            what = " (a restart file)" if "step" in ds.attrs else ""
            raise PlotError(f"{path}: no mesh ({', '.join(missing[:3])}, ...){what}; {expected}")
        n = ds.sizes.get("Time", 0)
        if not -n <= record < n:
            raise PlotError(f"--record {record}: {path} has {n} record(s); expected -{n} to {n - 1}")
        stamp = np.asarray(ds["xtime"].values[record]).tobytes().decode().strip()
        geometry = map_geometry(ds)
        h = ds["h"][record, :, 0].values
        h_s = ds["h_s"].values if "h_s" in ds.variables else None
        if h_s is not None and np.any(h_s):
            maps = {"h": (h + h_s, f"surface height h + h_s ({FIELDS['h'].units})", "viridis")}
        else:
            maps = {"h": (h, FIELDS["h"].label, "viridis")}
        if "vorticity" in ds.variables:
            maps["vorticity"] = (cell_vorticity(ds, ds["vorticity"].values[record, :, 0]),
                                 f"relative vorticity, kite mean on cells "
                                 f"({FIELDS['vorticity'].units})", "RdBu_r")
        if "h_l2" in ds.variables:
            # case 2 is steady: its exact solution is the initial state
            maps["h_error"] = (h - ds["h"][0, :, 0].values, f"h - h_exact ({FIELDS['h'].units})", "RdBu_r")
        targets = map_targets(path, maps, out_dir)
        for name, (values, label, cmap) in maps.items():
            target = targets[name]
            draw_map(geometry, values, cmap, f"{path.name}: {label} at {stamp}", target)
            written.append(target)
    return written


def main(argv=None) -> int:
    def options(p):
        p.add_argument("--record", type=int, default=-1, help="output record (default: the last)")
    return command("python -m swm.plot", __doc__.splitlines()[0],
                   "a history file written by run_model.py", options,
                   lambda args: plot_file(args.file, args.record, args.out, args.grid), argv)


if __name__ == "__main__":
    sys.exit(main())
