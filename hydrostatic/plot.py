"""PNG maps of a hydrostatic history (as JW06's figures): surface pressure (hPa) and 850 hPa
temperature (K) at a chosen day, on the cells' polygons (`framework.plot`: the file opened, the maps
drawn and the command line as the shallow-water model's); or, with --zonal-mean, the
latitude-pressure sections of the zonal and time mean zonal wind and temperature from a day on
(`hydrostatic.zonal_mean`, as Held and Suarez 1994 draw a climate).

    python -m hydrostatic.plot jw06_baroclinic_l5.nc [--day 9] [--out DIR] [--grid GRID]
    python -m hydrostatic.plot held_suarez_l4.nc --zonal-mean [--from-day 200]
"""
from __future__ import annotations

import pathlib
import sys

import numpy as np

from framework.files import map_path
from framework.plot import (PlotError, check_core, command, draw_map, map_geometry, map_targets,
                            open_map_file, save_png)

from hydrostatic.variables import GRADIENTS

#: name -> (scale, label, colour map) of the maps drawn where the history holds the field.
MAPS = {"surface_pressure": (0.01, "surface pressure (hPa)", "viridis"),
        "temperature_850hPa": (1.0, "850 hPa temperature (K)", "inferno")}


def plot_file(path, day: float | None = None, out_dir=None, grid=None) -> list[pathlib.Path]:
    """Write the maps of MAPS at the record nearest `day` (None: the last) of history `path`
    (STEM.<name>.day<day>.png), or of a gradient file its maps (`plot_gradients`); returns their
    paths. PlotError names a missing output directory, a day outside the file, a file without
    the fields, a file of another core (`framework.plot.check_core`) or a PNG there that this model
    did not write (`framework.plot.map_targets`)."""
    path = pathlib.Path(path)
    expected = "expected a history of the hydrostatic core (output.variables)"
    ds, out_dir = open_map_file(path, grid, out_dir, expected)
    written = []
    with ds:
        check_core(ds, path, "atmosphere")
        if "J" in ds.variables:            # a gradient file (it has Time and xtime too)
            return plot_gradients(path, out_dir, grid)
        names = [name for name in MAPS if name in ds.variables]
        if "Time" not in ds.variables or not names:
            raise PlotError(f"{path}: no Time or none of {', '.join(MAPS)}; {expected}")
        days = np.asarray(ds["Time"].values, dtype=np.float64)
        record = days.size - 1 if day is None else int(np.argmin(np.abs(days - day)))
        if day is not None and abs(days[record] - day) > 1e-6:
            raise PlotError(f"--day {day}: {path} has records at days "
                            f"{', '.join(f'{d:g}' for d in days)}; expected one of them")
        geometry = map_geometry(ds)
        targets = map_targets(path, [f"{name}.day{days[record]:g}" for name in names], out_dir)
        for name in names:
            scale, label, cmap = MAPS[name]
            target = targets[f"{name}.day{days[record]:g}"]
            draw_map(geometry, ds[name][record].values * scale, cmap,
                     f"{path.name}: {label}, day {days[record]:g}", target)
            written.append(target)
    return written


# -- the maps of a gradient file (hydrostatic.sensitivity) -----------------------------------------

def gradient_maps(output, controls) -> list[pathlib.Path]:
    """The PNGs of a gradient file `output` of `controls` (`plot_gradients`): STEM.<variable>.png
    per control, and STEM.dJdtheta0.section.png with theta."""
    names = [GRADIENTS[c][0] for c in GRADIENTS if c in controls]
    if "theta" in controls:
        names.append(f"{GRADIENTS['theta'][0]}.section")
    return [map_path(output, name) for name in names]


def plot_gradients(path, out_dir=None, grid=None) -> list[pathlib.Path]:
    """PNGs of a hydrostatic gradient file: the layered gradients (dJ/dtheta0, dJ/dmass0) at its
    `map_level` attribute's layer, dJ/du0 as the mean of |dJ/du0| over each cell's edges there,
    the surface fields (dJ/dps0, dJ/dphi_s) as they are, and a longitude-pressure cross-section of
    dJ/dtheta0 through its largest magnitude at that layer (`draw_section`)."""
    path = pathlib.Path(path)
    ds, out_dir = open_map_file(path, grid, out_dir, "expected a gradient file of the hydrostatic "
                                "core (run_model.py with a sensitivity section)")
    written = []
    with ds:
        check_core(ds, path, "atmosphere")
        if "map_level" not in ds.attrs or "J" not in ds.variables:
            raise PlotError(f"{path}: no J or no map_level attribute; expected a gradient file of "
                            "the hydrostatic core (run_model.py with a sensitivity section)")
        level = int(ds.attrs["map_level"]) - 1
        cost = float(ds["J"].values[0])
        maps = {}
        for control, (name, dims, _, _) in GRADIENTS.items():
            if name not in ds.variables:
                continue
            var = ds[name]
            values = var.values[0]
            label = f"{var.attrs['long_name']} ({var.attrs['units']})"
            if name == "dJdu0":
                n = ds["nEdgesOnCell"].values.astype(int)
                eoc = ds["edgesOnCell"].values.astype(int) - 1
                slots = np.arange(eoc.shape[1]) < n[:, None]
                magnitude = np.abs(values[:, level])
                values = np.where(slots, magnitude[np.maximum(eoc, 0)], 0.0).sum(axis=1) / n
                label = f"|dJ/du0|, mean over the cell's edges ({var.attrs['units']})"
                maps[name] = (values, f"{label}, layer {level + 1}", "viridis")
            elif "nVertLevels" in dims:
                maps[name] = (values[:, level], f"{label}, layer {level + 1}", "RdBu_r")
            else:
                maps[name] = (values, label, "RdBu_r")
        section = "dJdtheta0" in ds.variables
        targets = map_targets(path, list(maps) + (["dJdtheta0.section"] if section else []), out_dir)
        geometry = map_geometry(ds)
        for name, (values, label, cmap) in maps.items():
            draw_map(geometry, values, cmap, f"{path.name} (J = {cost:.6g}): {label}", targets[name])
            written.append(targets[name])
        if section:
            draw_section(ds, level, cost, path.name, targets["dJdtheta0.section"])
            written.append(targets["dJdtheta0.section"])
    return written


def draw_section(ds, level: int, cost: float, name: str, target) -> None:
    """The longitude-pressure cross-section of dJ/dtheta0 along the latitude of its largest
    magnitude at layer `level` (0-based): the cells within one mesh spacing of that latitude, at
    the layers' pressure for p_s = 1000 hPa (where a sensitivity leans with height, e.g. westward
    upward in a baroclinic wave, it shows); written atomically to `target`, marked as this
    model's PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    var = ds["dJdtheta0"]
    values = var.values[0]                                               # cells x layers
    lat, lon = np.degrees(ds["latCell"].values), np.degrees(ds["lonCell"].values) % 360.0
    latitude = float(lat[np.argmax(np.abs(values[:, level]))])
    spacing = np.degrees(np.sqrt(float(np.mean(ds["areaCell"].values)))
                         / float(ds.attrs.get("sphere_radius", 6371229.0)))
    cells = np.flatnonzero(np.abs(lat - latitude) <= 0.5 * spacing)
    cells = cells[np.argsort(lon[cells])]
    A, B = ds["hyai"].values, ds["hybi"].values
    p = 0.5 * (A[:-1] + A[1:] + (B[:-1] + B[1:]) * 1.0e5) / 100.0        # hPa, layers
    section = values[cells]
    limit = float(np.abs(section).max()) or 1.0
    fig, ax = plt.subplots(figsize=(10, 5), dpi=120)
    mesh = ax.pcolormesh(lon[cells], p, section.T, cmap="RdBu_r", vmin=-limit, vmax=limit,
                         shading="nearest")
    ax.set(xlabel="longitude (deg E)", ylabel="pressure at p_s = 1000 hPa (hPa)",
           ylim=(p[0], p[-1]), title=f"{name} (J = {cost:.6g}): {var.attrs['long_name']}, "
                                     f"section along {latitude:.1f} N")
    fig.colorbar(mesh, ax=ax, shrink=0.8, label=var.attrs["units"])
    save_png(fig, target)


# -- the zonal-mean sections of a history ----------------------------------------------------------

def plot_zonal_mean(path, from_day: float | None = None, out_dir=None,
                    grid=None) -> list[pathlib.Path]:
    """Write STEM.zonal_mean.png: the zonal and time mean zonal wind (m/s) and temperature (K)
    of history `path` over its records from `from_day` (None: all), against latitude and each
    band's mean layer pressure (hPa); returns its path. PlotError names a missing output
    directory, a history without the variables or a day past its last record."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hydrostatic.zonal_mean import ZonalMeanError, zonal_means

    path = pathlib.Path(path)
    ds, out_dir = open_map_file(path, grid, out_dir, "expected a history of the hydrostatic core")
    with ds:
        check_core(ds, path, "atmosphere")
        try:
            means = zonal_means(ds, from_day=from_day)
        except ZonalMeanError as exc:
            raise PlotError(f"{path}: {exc}") from None
    days = means["days"]
    lat = np.broadcast_to(means["latitude"][:, None], means["pressure"].shape)
    p = means["pressure"] / 100.0
    fig, axes = plt.subplots(1, 2, figsize=(13, 5), dpi=120, sharey=True)
    for ax, name, step, cmap, unit in ((axes[0], "uReconstructZonal", 5.0, "RdBu_r", "m/s"),
                                       (axes[1], "temperature", 5.0, "inferno", "K")):
        x = means[name]
        if name == "uReconstructZonal":
            limit = float(np.abs(x).max()) or 1.0
            fill = ax.pcolormesh(lat, p, x, cmap=cmap, vmin=-limit, vmax=limit, shading="gouraud")
        else:
            fill = ax.pcolormesh(lat, p, x, cmap=cmap, shading="gouraud")
        levels = np.arange(np.floor(x.min() / step) * step, x.max() + step, step)
        lines = ax.contour(lat, p, x, levels=levels, colors="k", linewidths=0.6)
        ax.clabel(lines, fmt="%g", fontsize=7)
        fig.colorbar(fill, ax=ax, shrink=0.8, label=unit)
        what = "zonal wind" if name == "uReconstructZonal" else "temperature"
        ax.set(xlabel="latitude (deg N)", title=f"zonal-mean {what}", xlim=(-90, 90))
    axes[0].set(ylabel="pressure (hPa)", ylim=(float(p.max()), float(p.min())))
    fig.suptitle(f"{path.name}: days {days[0]:g}-{days[-1]:g} ({days.size} records)")
    target = out_dir / f"{path.stem}.zonal_mean.png"
    save_png(fig, target)
    return [target]


def main(argv=None) -> int:
    def options(p):
        p.add_argument("--day", type=float, help="the day to draw (default: the last record)")
        p.add_argument("--zonal-mean", action="store_true", help="the zonal and time mean "
                       "sections of zonal wind and temperature instead of the maps")
        p.add_argument("--from-day", type=float, help="--zonal-mean: mean the records from this "
                       "day on (default: every record)")

    def plot(args):
        if args.from_day is not None and not args.zonal_mean:
            raise PlotError("--from-day goes with --zonal-mean")
        if args.zonal_mean:
            if args.day is not None:
                raise PlotError("--day draws the maps; --zonal-mean takes --from-day")
            return plot_zonal_mean(args.file, args.from_day, args.out, args.grid)
        return plot_file(args.file, args.day, args.out, args.grid)
    return command("python -m hydrostatic.plot", __doc__.splitlines()[0],
                   "a history file of the hydrostatic core", options, plot, argv)


if __name__ == "__main__":
    sys.exit(main())
