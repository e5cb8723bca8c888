"""What every model's PNG maps share: the cells of a file drawn on a longitude-latitude map
(their polygons, or a raster above RASTER_CELLS cells), one map written atomically with the
package's mark (`save_png`: model_name = MODEL_NAME), the maps' targets checked before any is
drawn, a file of another core refused (`check_core`), and a model's map command line (`command`).
The maps themselves are each model's: `swm.plot`, `hydrostatic.plot`.
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import textwrap

import numpy as np

from grids.atomic import atomic_path
from framework.files import map_path
from framework.mesh_files import open_history
from framework.output import MODEL_NAME, OutputError, map_problem
from framework.restart import CORES


def cell_polygons(ds):
    """Per cell, its Voronoi polygon in (lon, lat) degrees, unwrapped around the cell centre;
    cells that cross lon = +-180 are drawn twice (shifted by 360). `ds`: an xarray or netCDF4
    Dataset with the mesh."""
    n = np.asarray(ds["nEdgesOnCell"]).astype(int)
    voc = np.asarray(ds["verticesOnCell"]).astype(int) - 1
    lon_v, lat_v = np.degrees(np.asarray(ds["lonVertex"])), np.degrees(np.asarray(ds["latVertex"]))
    lon_c = np.degrees(np.angle(np.exp(1j * np.asarray(ds["lonCell"]))))
    polygons, owners = [], []
    for c in range(n.size):
        v = voc[c, :n[c]]
        lon = lon_c[c] + (lon_v[v] - lon_c[c] + 180.0) % 360.0 - 180.0
        xy = np.column_stack([lon, lat_v[v]])
        polygons.append(xy)
        owners.append(c)
        for shift in (-360.0, 360.0):
            if (lon + shift).min() < 180.0 and (lon + shift).max() > -180.0:
                polygons.append(xy + [shift, 0.0])
                owners.append(c)
    return polygons, np.array(owners)


#: Above this many cells maps are rasters of the cells (`cell_raster`) instead of their polygons.
RASTER_CELLS = 200_000


def cell_raster(ds, width: int = 3600):
    """Per pixel of a (width / 2) x width longitude-latitude image, the cell whose Voronoi region
    holds the pixel's centre: the nearest cell centre on the sphere (a k-d tree on unit vectors)."""
    from scipy.spatial import cKDTree

    def unit(lon, lat):
        return np.column_stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)])

    tree = cKDTree(unit(*(np.asarray(ds[name][:]).astype(np.float64) for name in ("lonCell", "latCell"))))
    height = width // 2
    lon = np.radians(-180.0 + (np.arange(width) + 0.5) * 360.0 / width)
    lat = np.radians(-90.0 + (np.arange(height) + 0.5) * 180.0 / height)
    lon, lat = np.meshgrid(lon, lat)
    return tree.query(unit(lon.ravel(), lat.ravel()), workers=-1)[1].reshape(height, width)


def map_geometry(ds):
    """How maps of `ds`'s cells are drawn: ("polygons", (polygons, owners)) or, above RASTER_CELLS
    cells, ("raster", cell index per pixel)."""
    if ds.sizes["nCells"] > RASTER_CELLS:
        return "raster", cell_raster(ds)
    return "polygons", cell_polygons(ds)


#: Characters of a map's title line (longer titles wrap: a line stays over the map's width).
TITLE_WIDTH = 80


def colorbar_scale(colorbar) -> None:
    """Tick labels of `colorbar` without matplotlib's offset text above it (where it meets the
    title): values of magnitude below 1e-2 or from 1e5 on are labelled in units of 10^n, named in
    the colorbar's label beside it."""
    from matplotlib.ticker import FuncFormatter, ScalarFormatter

    low, high = colorbar.mappable.get_clim()
    largest = max(abs(low), abs(high)) if np.isfinite([low, high]).all() else 0.0
    exponent = int(np.floor(np.log10(largest))) if largest > 0 else 0
    if -2 <= exponent <= 4:
        formatter = ScalarFormatter(useOffset=False)
        formatter.set_scientific(False)
        colorbar.ax.yaxis.set_major_formatter(formatter)
        return
    colorbar.ax.yaxis.set_major_formatter(FuncFormatter(
        lambda v, _: f"{v / 10.0**exponent:g}".replace("-", "\N{MINUS SIGN}")))
    colorbar.set_label(rf"$\times 10^{{{exponent}}}$")


def save_png(fig, target) -> None:
    """Write matplotlib figure `fig` to `target` as a PNG, atomically, with the text chunk
    model_name = MODEL_NAME (this model's PNG: `framework.output.png_written_by_model`); close
    it."""
    import matplotlib.pyplot as plt

    try:
        with atomic_path(target) as tmp:
            fig.savefig(tmp, format="png", bbox_inches="tight", metadata={"model_name": MODEL_NAME})
    finally:
        plt.close(fig)


def draw_map(geometry, values, cmap: str, title: str, target) -> None:
    """One longitude-latitude PNG map of cell values (diverging maps centred on zero) drawn by
    `geometry` (`map_geometry`), written atomically to `target` with the text chunk model_name =
    MODEL_NAME (this model's PNG: `framework.output.png_written_by_model`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import PolyCollection

    kind, shape = geometry
    values = np.asarray(values)
    fig, ax = plt.subplots(figsize=(10, 5), dpi=120 if kind == "polygons" else 200)
    limits = (None, None)
    if cmap == "RdBu_r":
        limit = float(np.abs(values).max()) or 1.0
        limits = (-limit, limit)
    if kind == "raster":
        collection = ax.imshow(values[shape], extent=(-180, 180, -90, 90), origin="lower", cmap=cmap,
                               vmin=limits[0], vmax=limits[1], interpolation="nearest")
    else:
        polygons, owners = shape
        collection = PolyCollection(polygons, array=values[owners], cmap=cmap, edgecolors="face",
                                    linewidths=0.2)
        collection.set_clim(*limits)
        ax.add_collection(collection)
    ax.set(xlim=(-180, 180), ylim=(-90, 90), xlabel="longitude (deg)", ylabel="latitude (deg)",
           title="\n".join(textwrap.wrap(title, TITLE_WIDTH)))    # not over the colorbar
    ax.set_aspect("equal")
    colorbar_scale(fig.colorbar(collection, ax=ax, shrink=0.8))
    save_png(fig, target)


class PlotError(ValueError):
    """A file or option a map command cannot use; `command` prints it as one line (exit status 2)."""


#: The command that draws the maps of each core's files (by their core_name attribute).
PLOT_COMMANDS = {"sw": "python -m swm.plot", "atmosphere": "python -m hydrostatic.plot"}


def core_of(ds) -> str | None:
    """The core_name of the core that wrote output file `ds` (open, xarray): a file with layers
    (nVertLevels > 1) is the hydrostatic core's ("atmosphere") whatever it says (its gradient
    files once said "sw"), else its core_name attribute (None where it has none)."""
    if ds.sizes.get("nVertLevels", 1) > 1:
        return "atmosphere"
    return ds.attrs.get("core_name")


def check_core(ds, path, core: str) -> None:
    """PlotError, before anything is drawn, when output file `path` (open as `ds`) is another
    core's than `core`: its maps have the same names as this command's (STEM.dJdu0.png, ...),
    so drawing them here would replace the ones its own run drew; the message names the command
    that draws them."""
    found = core_of(ds)
    if found is None or found == core:
        return
    other = PLOT_COMMANDS.get(found)
    raise PlotError(f"{path}: a file of {CORES.get(found, repr(found))} (core_name = {found!r}), "
                    f"not of {CORES[core]}; expected "
                    + (f"{other} {path} to draw its maps" if other else "a file of this model")
                    + " (nothing was drawn, no PNG replaced)")


def map_targets(path, names, out_dir=None) -> dict:
    """{name: PNG path} of the maps `names` of output file `path` (`framework.files.map_path`), each
    checked before any is drawn: PlotError names a PNG there that this model did not write
    (`framework.output.map_problem`), so nothing else is replaced."""
    targets = {name: map_path(path, name, out_dir) for name in names}
    for target in targets.values():
        problem = map_problem(target)
        if problem is not None:
            raise PlotError(f"the map of {path}: {target} {problem}")
    return targets


def open_map_file(path, grid, out_dir, expected: str):
    """(the dataset of output file `path` (`framework.mesh_files.open_history`, `grid`: the grid
    file of a history that references one elsewhere than recorded), the maps' folder: `out_dir`, or
    the file's own). PlotError names a missing folder, a file that is not netCDF (then `expected`),
    or a referenced grid file that is missing or another mesh. Any model's maps read their file
    so."""
    path = pathlib.Path(path)
    out_dir = pathlib.Path(out_dir) if out_dir is not None else path.parent
    if not out_dir.is_dir():
        raise PlotError(f"--out {out_dir}: no such directory")
    try:
        ds = open_history(path, grid, decode_times=False)
    except OutputError as exc:
        raise PlotError(str(exc)) from None
    except (OSError, ValueError) as exc:
        why = f" ({exc.strerror})" if isinstance(exc, OSError) and exc.strerror else ""
        raise PlotError(f"{path}: not a netCDF file{why}; {expected}") from None
    return ds, out_dir


def command(prog: str, description: str, file_help: str, options, plot, argv=None) -> int:
    """A model's map command line, `prog FILE [its options] [--out DIR] [--grid GRID]`:
    `options(parser)` adds the model's own options, `plot(args)` writes the maps and returns their
    paths, each printed. A missing FILE or a PlotError is one line on stderr, exit status 2."""
    import grids

    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("file", help=file_help)
    options(p)
    p.add_argument("--out", help="directory of the PNG files (default: beside the history file)")
    p.add_argument("--grid", help="the MPAS grid file of a history that references one "
                   "(default: the path the history records)")
    p.add_argument("--version", action="version", version=f"%(prog)s (meshops {grids.__version__})")
    args = p.parse_args(argv)
    if not pathlib.Path(args.file).is_file():
        print(f"{prog}: error: {args.file}: no such file", file=sys.stderr)
        return 2
    try:
        written = plot(args)
    except PlotError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    for target in written:
        print(f"wrote {target}")
    return 0
